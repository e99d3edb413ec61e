"""What the chat and the REPL share: the conversation, slash commands, sessions on disk and their
options, stop requests, and statistics as one line of text."""
