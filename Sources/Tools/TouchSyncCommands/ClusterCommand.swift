import ArgumentParser
import TouchSyncAccess

/// `touchsync cluster show`: where a board lives in a sharded cluster.
struct ClusterCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cluster",
        abstract: "Boards sharded over hubs: where each board lives.",
        discussion: """
            A cluster file lists hubs (name and endpoints; its format and the hashing rule are in docs/protocol.md, "Sharded boards"). Every \
            client given --cluster maps a board to its hub by rendezvous hashing, so \
            adding a hub moves only the boards the new hub takes. Each hub runs with \
            --cluster FILE --name NAME and refuses other hubs' boards (WRONG_HUB).
            """,
        subcommands: [Show.self])

    struct Show: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print the hub of each board given.",
            discussion: """
                One line per --board, in the order given: \
                BOARD: hub NAME  agents INGEST  subscribers PUBLISH  snapshots SNAPSHOT \
                (two spaces between fields; docs/protocol.md, "Sharded boards").
                """)
        @Option(help: "The cluster file (JSON).") var cluster: String
        @Option(parsing: .singleValue, help: "A board (repeatable).") var board: [String]

        func validate() throws {
            guard !board.isEmpty else { throw ValidationError("--board names at least one board") }
            for name in board { try validateBoard(name) }
        }

        func run() throws {
            let map: ClusterMap
            do {
                map = try ClusterMap.load(from: cluster)
            } catch {
                throw CommandFailure(error.description)
            }
            for name in board {
                let hub = map.hub(for: name)
                emit("\(name): hub \(hub.name)  agents \(hub.ingest)  subscribers \(hub.publish)  snapshots \(hub.snapshot)")
            }
        }
    }
}
