import TouchSyncCommands

// The executable is only this: every command lives in TouchSyncCommands, where tests reach it.
TouchSyncCommand.main()
