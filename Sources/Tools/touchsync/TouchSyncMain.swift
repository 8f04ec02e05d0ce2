import TouchSyncCommands

// The executable is only this: every command lives in TouchSyncCommands, where tests reach it.
@main
struct TouchSyncMain {
    static func main() async {
        await TouchSyncCommand.main()
    }
}
