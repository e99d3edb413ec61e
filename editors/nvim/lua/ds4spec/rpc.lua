-- JSON-RPC 2.0 client for `ds4spec serve --stdio`: starts the server as a job, frames messages with
-- Content-Length headers (as LSP does) and routes responses and `partial` notifications to callbacks.
-- See docs/protocol.md in the ds4spec repository for the methods.

local M = {}

local Client = {}
Client.__index = Client

-- Starts `cmd` (a list) and returns a client. `opts.on_exit(code, stderr_tail)` is called when it ends.
function M.start(cmd, opts)
  local self = setmetatable({
    buffer = "",
    next_id = 0,
    pending = {}, -- id -> {callback = fn(err, result), on_partial = fn(text)}
    stderr = {},
    opts = opts or {},
  }, Client)
  local ok, job = pcall(vim.fn.jobstart, cmd, {
    on_stdout = function(_, data)
      -- Each item is a line; joining with "\n" restores the bytes, the first item continuing the last chunk.
      self:_feed(table.concat(data, "\n"))
    end,
    on_stderr = function(_, data)
      for _, line in ipairs(data) do
        if line ~= "" then
          table.insert(self.stderr, line)
          if #self.stderr > 50 then
            table.remove(self.stderr, 1)
          end
        end
      end
    end,
    on_exit = function(_, code)
      self.job = nil
      local pending = self.pending
      self.pending = {}
      for _, p in pairs(pending) do
        p.callback({ code = -32099, message = "the ds4spec server exited" }, nil)
      end
      if self.opts.on_exit then
        self.opts.on_exit(code, table.concat(self.stderr, "\n"))
      end
    end,
  })
  if not ok or job <= 0 then
    error("ds4spec: cannot start the server: " .. table.concat(cmd, " "))
  end
  self.job = job
  return self
end

function Client:running()
  return self.job ~= nil
end

function Client:_feed(chunk)
  self.buffer = self.buffer .. chunk
  while true do
    local head_end = self.buffer:find("\r\n\r\n", 1, true)
    if not head_end then
      return
    end
    local length = tonumber(self.buffer:sub(1, head_end):match("[Cc]ontent%-[Ll]ength:%s*(%d+)"))
    local body_start = head_end + 4
    if not length then
      self.buffer = self.buffer:sub(body_start) -- never sent by the server; skip rather than stall
    elseif #self.buffer < body_start + length - 1 then
      return
    else
      local body = self.buffer:sub(body_start, body_start + length - 1)
      self.buffer = self.buffer:sub(body_start + length)
      local ok, msg = pcall(vim.json.decode, body)
      if ok and type(msg) == "table" then
        self:_dispatch(msg)
      end
    end
  end
end

function Client:_dispatch(msg)
  if msg.method ~= nil then
    if msg.method == "partial" and type(msg.params) == "table" then
      local p = self.pending[msg.params.id]
      if p and p.on_partial then
        p.on_partial(msg.params.text)
      end
    end
    return
  end
  local p = self.pending[msg.id]
  if not p then
    return
  end
  self.pending[msg.id] = nil
  if msg.error ~= nil and msg.error ~= vim.NIL then
    p.callback(msg.error, nil)
  else
    p.callback(nil, msg.result)
  end
end

local function send(self, message)
  if not self.job then
    return false
  end
  local body = vim.json.encode(message)
  vim.fn.chansend(self.job, "Content-Length: " .. #body .. "\r\n\r\n" .. body)
  return true
end

-- Sends a request; `callback(err, result)` gets the answer, `on_partial(text)` each streamed piece.
-- Returns the request id, or nil when the server is not running.
function Client:request(method, params, callback, on_partial)
  self.next_id = self.next_id + 1
  local id = self.next_id
  self.pending[id] = { callback = callback or function() end, on_partial = on_partial }
  if not send(self, { jsonrpc = "2.0", id = id, method = method, params = params or vim.empty_dict() }) then
    self.pending[id] = nil
    return nil
  end
  return id
end

function Client:notify(method, params)
  return send(self, { jsonrpc = "2.0", method = method, params = params or vim.empty_dict() })
end

function Client:cancel(id)
  if id and self.pending[id] then
    self:notify("cancel", { id = id })
  end
end

-- Asks the server to shut down and exit; kills it if it has not exited after `timeout_ms`.
-- With `wait`, blocks until it has (for VimLeavePre, when nothing else will run afterwards).
function Client:stop(timeout_ms, wait)
  local job = self.job
  if not job then
    return
  end
  self:request("shutdown", nil, function()
    self:notify("exit")
  end)
  if wait then
    vim.wait(timeout_ms or 2000, function()
      return self.job == nil
    end, 10)
    if self.job then
      vim.fn.jobstop(job)
    end
  else
    vim.defer_fn(function()
      if self.job == job then
        vim.fn.jobstop(job)
      end
    end, timeout_ms or 2000)
  end
end

return M
