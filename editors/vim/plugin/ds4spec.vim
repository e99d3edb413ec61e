vim9script
# ds4spec for Vim 9: completion at the cursor from `ds4spec serve --stdio`.
#
# The server runs as a job on a channel in "lsp" mode, which frames JSON-RPC with Content-Length headers
# natively. :Ds4specComplete (or <C-l> in insert mode) asks for a completion of the text around the cursor
# (fill in the middle); the answer is inserted at the cursor if the buffer has not changed meanwhile.
# The server starts on first use and stops when Vim exits. See editors/vim/README.md and docs/protocol.md.

if exists('g:loaded_ds4spec') || v:version < 900
  finish
endif
g:loaded_ds4spec = 1

g:ds4spec_cmd = get(g:, 'ds4spec_cmd', ['ds4spec', 'serve', '--stdio'])
g:ds4spec_max_tokens = get(g:, 'ds4spec_max_tokens', 128)
g:ds4spec_stop_at = get(g:, 'ds4spec_stop_at', 'block')  # 'line', 'block' or '' (no stop)
g:ds4spec_fim = get(g:, 'ds4spec_fim', true)
# 'idle', 'running', 'inserted', 'stale' (the buffer changed first), 'cancelled' or 'error: ...'
g:ds4spec_status = 'idle'

var job: job = null_job
var pending: dict<any> = {}  # the completion in flight: buffer, line, col, changedtick, id

def Running(): bool
  return job != null_job && job_status(job) == 'run'
enddef

def Start(): channel
  if !Running()
    job = job_start(g:ds4spec_cmd, {
      in_mode: 'lsp', out_mode: 'lsp', err_mode: 'nl', noblock: true,
      out_cb: (_, _) => 0,  # notifications: the partial text is not shown, the answer is inserted whole
      err_cb: (_, line) => 0,  # the server's log; `:Ds4specStart` users can read it with a wrapper script
      exit_cb: (_, code) => {
        job = null_job
        if !empty(pending)
          pending = {}
          g:ds4spec_status = 'error: the server exited with code ' .. code
        endif
      },
    })
    if job_status(job) != 'run'
      echoerr 'ds4spec: cannot start ' .. join(g:ds4spec_cmd)
    endif
    g:ds4spec_server_pid = job_info(job).process
    ch_sendexpr(job_getchannel(job), {method: 'initialize', params: {clientInfo: {name: 'ds4spec.vim'}}},
      {callback: (_, msg) => has_key(msg, 'error') ? Error(msg.error.message) : 0})
  endif
  return job_getchannel(job)
enddef

def Error(message: string): number
  echohl WarningMsg | echomsg 'ds4spec: ' .. message | echohl None
  return 0
enddef

def Stop()
  if Running()
    var chan = job_getchannel(job)
    ch_evalexpr(chan, {method: 'shutdown'}, {timeout: 2000})
    ch_sendexpr(chan, {method: 'exit'})  # no callback: a notification
    var waited = 0
    while Running() && waited < 2000
      sleep 10m
      waited += 10
    endwhile
    if Running()
      job_stop(job)
    endif
  endif
enddef

# The text before and after the cursor, as the file would hold it.
def AroundCursor(lnum: number, col: number): list<string>
  var lines = getline(1, '$')
  var line = lines[lnum - 1]
  var before = (lnum > 1 ? lines[0 : lnum - 2] : []) + [strpart(line, 0, col - 1)]
  var after = [strpart(line, col - 1)] + lines[lnum :]
  return [join(before, "\n"), join(after, "\n") .. (&eol ? "\n" : '')]
enddef

def Complete()
  var [prefix, suffix] = AroundCursor(line('.'), col('.'))
  var params: dict<any> = {prefix: prefix, max_tokens: g:ds4spec_max_tokens, language: &filetype,
    document: expand('%:p') != '' ? expand('%:p') : 'buffer ' .. bufnr()}
  if g:ds4spec_fim
    params.suffix = suffix
  endif
  if g:ds4spec_stop_at != ''
    params.stop_at = g:ds4spec_stop_at
  endif
  var chan = Start()
  g:ds4spec_status = 'running'
  var request = {buffer: bufnr(), line: line('.'), col: col('.'), tick: b:changedtick}
  pending = request
  var sent = ch_sendexpr(chan, {method: 'complete', params: params},
    {callback: (_, msg) => Answer(request, msg)})
  request.id = sent.id
enddef

def Answer(request: dict<any>, msg: dict<any>): number
  if pending isnot request
    return 0  # a newer request replaced this one (the server superseded it too)
  endif
  pending = {}
  if has_key(msg, 'error')
    g:ds4spec_status = msg.error.code == -32800 ? 'cancelled' : 'error: ' .. msg.error.message
    if msg.error.code != -32800
      Error(msg.error.message)
    endif
    return 0
  endif
  if bufnr() != request.buffer || b:changedtick != request.tick
    g:ds4spec_status = 'stale'
    return 0
  endif
  Insert(request.line, request.col, msg.result.text)
  g:ds4spec_status = 'inserted'
  return 0
enddef

# Inserts `text` at byte column `col` of line `lnum` and puts the cursor after it.
def Insert(lnum: number, col: number, text: string)
  var line = getline(lnum)
  var parts = split(text, "\n", true)
  var last = len(parts) - 1
  var end_col = (last == 0 ? col - 1 : 0) + len(parts[last])
  parts[0] = strpart(line, 0, col - 1) .. parts[0]
  parts[last] = parts[last] .. strpart(line, col - 1)
  setline(lnum, parts[0])
  append(lnum, parts[1 :])
  cursor(lnum + last, end_col + 1)
enddef

def Cancel()
  if !empty(pending) && Running()
    ch_sendexpr(job_getchannel(job), {method: 'cancel', params: {id: pending.id}})
  endif
enddef

def Stats()
  echo ch_evalexpr(Start(), {method: 'stats'}, {timeout: 5000})
enddef

command! Ds4specStart Start()
command! Ds4specStop Stop()
command! Ds4specComplete Complete()
command! Ds4specCancel Cancel()
command! Ds4specStats Stats()

inoremap <silent> <Plug>(ds4spec-complete) <Cmd>Ds4specComplete<CR>
if !get(g:, 'ds4spec_no_maps', false) && empty(maparg('<C-l>', 'i'))
  imap <C-l> <Plug>(ds4spec-complete)
endif

augroup ds4spec
  autocmd!
  autocmd VimLeavePre * Stop()
augroup END
