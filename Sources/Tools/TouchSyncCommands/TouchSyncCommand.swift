import ArgumentParser

/// `touchsync`: the root command.
public struct TouchSyncCommand: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "touchsync",
        abstract: "Multi-user touch and stroke sync over ZeroMQ.",
        discussion: """
            Agents publish touch-phase events; a hub merges each user's touches into \
            its own namespace, orders strokes per board and publishes stroke diffs; \
            subscribers keep an exact replica from a snapshot plus those diffs.

            Try it from three shells:
              touchsync hub
              touchsync spectate --board demo
              touchsync draw --board demo
            """,
        version: "0.2.0 (protocol v1)",
        subcommands: [
            HubCommand.self, SpectateCommand.self, DrawCommand.self, LoadCommand.self, DemoCommand.self,
            BenchCommand.self, ReplayCommand.self, RenderCommand.self, CompactCommand.self, KeysCommand.self, HealthCommand.self, RelayCommand.self, ClusterCommand.self, TUIOCommand.self, WebCommand.self, StoreCommand.self,
        ]
    )

    public init() {}
}
