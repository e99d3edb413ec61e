vim9script
# Driven by tests/test_editor_clients.py: sources the plugin from the repository, opens a file, asks the
# server for a completion at a cursor position, waits for it to be inserted and writes the file.
# Exits with 3 and the reason in $DS4SPEC_ERROR_OUT on any failure.

def Run()
  g:ds4spec_cmd = json_decode($DS4SPEC_SERVER)
  g:ds4spec_stop_at = ''
  g:ds4spec_max_tokens = str2nr($DS4SPEC_MAX_TOKENS)
  execute 'source ' .. fnameescape($DS4SPEC_REPO .. '/editors/vim/plugin/ds4spec.vim')
  execute 'edit ' .. fnameescape($DS4SPEC_FILE)
  cursor(str2nr($DS4SPEC_ROW), str2nr($DS4SPEC_COL) + 1)
  execute 'Ds4specComplete'  # defined by the plugin sourced above, after this function was compiled
  var waited = 0
  while g:ds4spec_status == 'running' && waited < 60000
    sleep 20m
    waited += 20
  endwhile
  if g:ds4spec_status != 'inserted'
    throw 'no completion was inserted: ' .. g:ds4spec_status
  endif
  write
  writefile([string(g:ds4spec_server_pid)], $DS4SPEC_PID_OUT)
enddef

try
  Run()
  qall!
catch
  writefile([v:exception .. ' at ' .. v:throwpoint], $DS4SPEC_ERROR_OUT)
  cquit 3
endtry
