-- ds4spec for Neovim (0.7 or newer): inline ghost-text completion at the cursor, accepted with a key, and
-- :Ds4specChat, which sends the selection or the buffer to chat. The plugin starts `ds4spec serve --stdio`
-- itself when first needed and stops it when Neovim exits. See editors/nvim/README.md.

local rpc = require("ds4spec.rpc")

local M = {}

local api = vim.api
local ns = api.nvim_create_namespace("ds4spec")

M.config = {
  cmd = { "ds4spec", "serve", "--stdio" }, -- add flags here: --target, --draft, --max-tokens, ...
  auto = true, -- ask for a completion when typing pauses in insert mode
  debounce_ms = 300,
  fim = true, -- send the text after the cursor too (fill in the middle)
  stop_at = "block", -- "line", "block" or false: where an option ends
  max_tokens = 128,
  chat_max_tokens = 512,
  accept_key = "<Tab>", -- insert mode; falls back to the key itself when no suggestion is shown
  trigger_key = "<M-\\>", -- insert mode: ask for a completion now
  dismiss_key = "<C-]>", -- insert mode: hide the suggestion and cancel its request
  hl_group = "Comment",
}

local state = {
  client = nil,
  info = nil, -- the initialize result
  suggestion = nil, -- {buf, row, col, text, id, done}
  timer = nil, -- the debounce timer, reused
  start_failed = false,
}

local function notify(msg, level)
  vim.notify("ds4spec: " .. msg, level or vim.log.levels.INFO)
end

-- Server ---------------------------------------------------------------------------------------------------

-- Starts the server unless it runs; returns the client, or nil (said once) when the command cannot start.
function M.start()
  if state.client and state.client:running() then
    return state.client
  end
  local ok, client = pcall(rpc.start, M.config.cmd, {
    on_exit = function(code, stderr)
      state.client = nil
      if code ~= 0 then
        notify("the server exited with code " .. code .. "\n" .. stderr, vim.log.levels.WARN)
      end
    end,
  })
  if not ok then
    if not state.start_failed then
      notify(tostring(client), vim.log.levels.ERROR)
    end
    state.start_failed = true -- said once; :Ds4specStart tries again
    return nil
  end
  state.client, state.start_failed = client, false
  state.client:request("initialize", { clientInfo = { name = "ds4spec.nvim" } }, function(err, result)
    if err then
      notify(err.message, vim.log.levels.ERROR)
    else
      state.info = result
    end
  end)
  return state.client
end

-- Stops the server; `wait` blocks until it has exited (used on VimLeavePre).
function M.stop(wait)
  if state.client then
    state.client:stop(2000, wait)
  end
end

function M.stats(callback)
  local client = M.start()
  if not client then
    return
  end
  client:request("stats", nil, function(err, result)
    if callback then
      callback(err, result)
    elseif err then
      notify(err.message, vim.log.levels.ERROR)
    else
      notify(vim.inspect(result))
    end
  end)
end

-- Ghost text -----------------------------------------------------------------------------------------------

local function clear_marks(buf)
  if api.nvim_buf_is_valid(buf) then
    api.nvim_buf_clear_namespace(buf, ns, 0, -1)
  end
end

local function render(s)
  clear_marks(s.buf)
  if s.text == "" or not api.nvim_buf_is_valid(s.buf) then
    return
  end
  local lines = vim.split(s.text, "\n", { plain = true })
  local line = api.nvim_buf_get_lines(s.buf, s.row, s.row + 1, false)[1] or ""
  local pos = "eol"
  if vim.fn.has("nvim-0.10") == 1 then
    pos = "inline"
  elseif s.col >= #line then
    pos = "overlay"
  end
  -- strtrans: control characters show as ^X, as they would in the buffer once accepted.
  local opts = { virt_text = { { vim.fn.strtrans(lines[1]), M.config.hl_group } }, virt_text_pos = pos,
                 hl_mode = "combine" }
  if #lines > 1 then
    opts.virt_lines = {}
    for i = 2, #lines do
      table.insert(opts.virt_lines, { { vim.fn.strtrans(lines[i]), M.config.hl_group } })
    end
  end
  api.nvim_buf_set_extmark(s.buf, ns, s.row, math.min(s.col, #line), opts)
end

-- Hides the suggestion and cancels its request if it is still running.
function M.dismiss()
  local s = state.suggestion
  state.suggestion = nil
  if s then
    clear_marks(s.buf)
    if not s.done and state.client then
      state.client:cancel(s.id)
    end
  end
end

function M.has_suggestion()
  local s = state.suggestion
  return s ~= nil and s.text ~= "" and s.buf == api.nvim_get_current_buf()
end

-- The text before and after the cursor, as the file would hold it.
local function around_cursor(buf, row, col)
  local lines = api.nvim_buf_get_lines(buf, 0, -1, false)
  local before = {}
  for i = 1, row do
    before[i] = lines[i]
  end
  before[row] = (lines[row] or ""):sub(1, col)
  local prefix = table.concat(before, "\n")
  local after = { (lines[row] or ""):sub(col + 1) }
  for i = row + 1, #lines do
    table.insert(after, lines[i])
  end
  local suffix = table.concat(after, "\n") .. (vim.bo[buf].eol and "\n" or "")
  return prefix, suffix
end

-- Asks for a completion at the cursor; the answer streams in as ghost text.
function M.complete()
  M.dismiss()
  local buf = api.nvim_get_current_buf()
  local cursor = api.nvim_win_get_cursor(0)
  local row, col = cursor[1], cursor[2]
  local prefix, suffix = around_cursor(buf, row, col)
  local s = { buf = buf, row = row - 1, col = col, text = "", done = false }
  state.suggestion = s
  local params = {
    prefix = prefix,
    document = api.nvim_buf_get_name(buf) ~= "" and api.nvim_buf_get_name(buf) or ("buffer " .. buf),
    language = vim.bo[buf].filetype,
    max_tokens = M.config.max_tokens,
  }
  if M.config.fim then
    params.suffix = suffix
  end
  if M.config.stop_at then
    params.stop_at = M.config.stop_at
  end
  local client = M.start()
  if not client then
    state.suggestion = nil
    return nil
  end
  s.id = client:request("complete", params, function(err, result)
    if state.suggestion ~= s then
      return -- superseded or dismissed
    end
    s.done = true
    if err then
      if err.code ~= -32800 then
        notify(err.message, vim.log.levels.WARN)
      end
      M.dismiss()
      return
    end
    s.text = result.text
    render(s)
  end, function(text)
    if state.suggestion == s then
      s.text = s.text .. text
      render(s)
    end
  end)
  return s.id
end

-- Inserts the suggestion at the cursor and moves the cursor after it; false when there is none.
function M.accept()
  local s = state.suggestion
  if not s or s.text == "" or s.buf ~= api.nvim_get_current_buf() then
    return false
  end
  M.dismiss()
  local lines = vim.split(s.text, "\n", { plain = true })
  api.nvim_buf_set_text(s.buf, s.row, s.col, s.row, s.col, lines)
  local last_row = s.row + #lines
  local last_col = #lines == 1 and s.col + #lines[1] or #lines[#lines]
  api.nvim_win_set_cursor(0, { last_row, last_col })
  return true
end

-- The suggestion's state, for scripts and tests: {text, done} or nil.
function M.suggestion()
  local s = state.suggestion
  return s and { text = s.text, done = s.done } or nil
end

-- Chat -----------------------------------------------------------------------------------------------------

local function chat_buffer()
  vim.cmd("botright new")
  local buf = api.nvim_get_current_buf()
  vim.bo[buf].buftype = "nofile"
  vim.bo[buf].bufhidden = "hide"
  vim.bo[buf].swapfile = false
  vim.bo[buf].filetype = "markdown"
  return buf
end

-- Sends `question` and lines `first`..`last` of the current buffer (all of it when nil) to chat; the reply
-- streams into a scratch buffer, which is returned with the request id.
function M.chat(question, first, last)
  local src = api.nvim_get_current_buf()
  local lines = api.nvim_buf_get_lines(src, (first or 1) - 1, last or -1, false)
  question = (question and question ~= "") and question or "Explain this code."
  local content = question .. "\n\n" .. table.concat(lines, "\n") .. "\n"
  local client = M.start()
  if not client then
    return nil
  end
  local buf = chat_buffer()
  local reply = ""
  local function show(text)
    if api.nvim_buf_is_valid(buf) then
      api.nvim_buf_set_lines(buf, 0, -1, false, vim.split(text, "\n", { plain = true }))
    end
  end
  local id = client:request("chat", {
    messages = { { role = "user", content = content } },
    max_tokens = M.config.chat_max_tokens,
  }, function(err, result)
    if err then
      notify(err.message, vim.log.levels.WARN)
    else
      show(result.text)
    end
    vim.b[buf].ds4spec_done = true
  end, function(text)
    reply = reply .. text
    show(reply)
  end)
  return buf, id
end

-- Setup ----------------------------------------------------------------------------------------------------

function M.setup(opts)
  M.config = vim.tbl_deep_extend("force", M.config, opts or {})
  if opts and opts.cmd then
    M.config.cmd = opts.cmd -- a list replaces, never merges
  end
  local group = api.nvim_create_augroup("ds4spec", { clear = true })
  local cmd = api.nvim_create_user_command
  cmd("Ds4specStart", function()
    state.start_failed = false
    M.start()
  end, {})
  cmd("Ds4specStop", function() M.stop() end, {})
  cmd("Ds4specComplete", function() M.complete() end, {})
  cmd("Ds4specAccept", function() M.accept() end, {})
  cmd("Ds4specDismiss", function() M.dismiss() end, {})
  cmd("Ds4specStats", function() M.stats() end, {})
  cmd("Ds4specChat", function(c)
    if c.range > 0 then
      M.chat(c.args, c.line1, c.line2)
    else
      M.chat(c.args)
    end
  end, { range = true, nargs = "*" })

  local map = vim.keymap.set
  map("i", M.config.accept_key, function()
    if M.has_suggestion() then
      vim.schedule(M.accept) -- the buffer cannot change while an expr mapping is evaluated
      return ""
    end
    return M.config.accept_key
  end, { expr = true, desc = "ds4spec: accept the suggestion" })
  map("i", M.config.trigger_key, M.complete, { desc = "ds4spec: complete at the cursor" })
  map("i", M.config.dismiss_key, M.dismiss, { desc = "ds4spec: dismiss the suggestion" })

  if M.config.auto then
    api.nvim_create_autocmd("TextChangedI", {
      group = group,
      callback = function()
        M.dismiss()
        state.timer = state.timer or vim.loop.new_timer()
        state.timer:stop()
        state.timer:start(M.config.debounce_ms, 0, vim.schedule_wrap(function()
          if api.nvim_get_mode().mode:sub(1, 1) == "i" then
            M.complete()
          end
        end))
      end,
    })
  end
  api.nvim_create_autocmd({ "InsertLeave", "BufLeave" }, { group = group, callback = M.dismiss })
  api.nvim_create_autocmd("CursorMovedI", {
    group = group,
    callback = function()
      local s = state.suggestion
      if s then
        local cursor = api.nvim_win_get_cursor(0)
        if cursor[1] - 1 ~= s.row or cursor[2] ~= s.col then
          M.dismiss()
        end
      end
    end,
  })
  api.nvim_create_autocmd("VimLeavePre", { group = group, callback = function() M.stop(true) end })
end

return M
