-- Driven by tests/test_editor_clients.py: loads the plugin from the repository, opens a file, asks the
-- server for a completion at a cursor position, accepts it, writes the file, then sends two lines to chat
-- and writes the reply shown in the chat buffer. Exits non-zero with the reason on stderr on any failure.
local env = vim.env

local function run()
  vim.opt.runtimepath:prepend(env.DS4SPEC_REPO .. "/editors/nvim")
  local ds4spec = require("ds4spec")
  ds4spec.setup({
    cmd = vim.json.decode(env.DS4SPEC_SERVER),
    auto = false,
    stop_at = false,
    max_tokens = tonumber(env.DS4SPEC_MAX_TOKENS),
    chat_max_tokens = tonumber(env.DS4SPEC_MAX_TOKENS),
  })
  vim.cmd("edit " .. vim.fn.fnameescape(env.DS4SPEC_FILE))
  local client = ds4spec.start()
  vim.fn.writefile({ tostring(vim.fn.jobpid(client.job)) }, env.DS4SPEC_PID_OUT)

  vim.api.nvim_win_set_cursor(0, { tonumber(env.DS4SPEC_ROW), tonumber(env.DS4SPEC_COL) })
  ds4spec.complete()
  local ok = vim.wait(60000, function()
    local s = ds4spec.suggestion()
    return s == nil or s.done
  end, 20)
  local s = ds4spec.suggestion()
  assert(ok and s and s.done, "no completion arrived")
  local ns = vim.api.nvim_create_namespace("ds4spec")
  local marks = vim.api.nvim_buf_get_extmarks(0, ns, 0, -1, { details = true })
  assert(#marks == 1, "no ghost text was shown")
  local first = vim.split(s.text, "\n", { plain = true })[1]
  local shown = marks[1][4].virt_text[1][1]
  assert(shown == vim.fn.strtrans(first), "the ghost text is not the suggestion's first line: " .. shown)
  local below = #vim.split(s.text, "\n", { plain = true }) - 1
  assert(#(marks[1][4].virt_lines or {}) == below, "the ghost text's other lines are not shown below")
  assert(ds4spec.accept(), "nothing to accept")
  assert(#vim.api.nvim_buf_get_extmarks(0, ns, 0, -1, {}) == 0, "the ghost text stayed after accepting")
  vim.cmd("write")

  local buf = ds4spec.chat(env.DS4SPEC_QUESTION, 1, 2)
  assert(vim.wait(60000, function() return vim.b[buf].ds4spec_done end, 20), "no chat reply arrived")
  vim.fn.writefile(vim.api.nvim_buf_get_lines(buf, 0, -1, false), env.DS4SPEC_CHAT_OUT, "b")
end

local ok, err = xpcall(run, debug.traceback)
if ok then
  vim.cmd("qall!")
else
  io.stderr:write("nvim session failed: " .. tostring(err) .. "\n")
  vim.cmd("cquit 3")
end
