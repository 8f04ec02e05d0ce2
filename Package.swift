// swift-tools-version: 6.1
// TouchSync: multi-user touch and stroke sync over ZeroMQ.
//
// Modules by layer (the folders under Sources/; `layers` below), each
// depending only on modules listed before it or in a layer above:
//
// Sources/Cores: pure, no I/O, no clock, no threads
//   TouchSyncCore        the stroke model: board state, reducer, replica, digest
//   TouchSyncSimulation  simulated fingers: deterministic multi-user touch sessions
//   TouchSyncWire        protobuf messages (generated, committed) and codecs to and from the core
//   TouchSyncRender      boards drawn as SVG, ink outlines
//   TouchSyncTUIO        OSC and TUIO 1.1 cursor messages, parsed and built
//   TouchSyncAccessModel access lists (users, keys, roles per board pattern), cluster maps, CURVE key values; no files
//   TouchSyncHubCore     the hub's rules: sessions, boards, acks, liveness (events in, actions out)
//   TouchSyncClientCore  the client's rules: AgentProtocol (numbering, window, resend) and ReplicaSync (snapshot then live)
//   TouchSyncWebWire     the browser wire: one Codable message type both ways, binary frames, the board encoder, a page-like replica
//   TouchSyncGatewayCore the gateway's tab rules: sessions, numbering and acks, grace, limits, followed boards (time in, actions out)
// Sources/Adapters: the cores driven by real I/O
//   CZeroMQ, ZeroMQ      system libzmq (pkg-config "libzmq", Debian libzmq3-dev) and its Swift binding
//   TouchSyncAccess      the access list's, cluster map's and CURVE keys' files (re-exports TouchSyncAccessModel)
//   TouchSyncJournal     the durable journal: checksummed segment files per board, recovery, history for replay
//   TouchSyncStore       the PostgreSQL board store: schema, group-committed batches under board leases, recovery
//   TouchSyncHub         the hub: one thread owning the sockets and a HubCore (a ServiceLifecycle Service); relays
//   TouchSyncClient      agents (UIKit-shaped touch API) and subscribers over ZeroMQ, many on a few threads
//   TouchSyncWeb         the browser gateway: the whiteboard page, tabs' agents, board fan-out over WebSockets
//   TouchSyncTUIOBridge  TUIO over UDP to agents (multi-touch hardware drawing on a board)
// Sources/Tools: what people run, and what tests and benches use
//   TouchSyncLoad        load runs (over ZeroMQ, or as browser tabs over WebSockets) and benchmark engines
//   TouchSyncBrowser     a headless Chromium over the DevTools protocol (browser tests, touchsync-browser-bench)
//   TouchSyncCommands    the `touchsync` subcommands, as a testable library
//   touchsync            a thin @main over TouchSyncCommands (the shipped CLI; no Chromium driver)
//   touchsync-browser-bench  the whiteboard end to end in headless Chromium
import Foundation
import PackageDescription

let swiftSettings: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
    .enableUpcomingFeature("ExistentialAny"),
]

let package = Package(
    name: "TouchSync",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "touchsync", targets: ["touchsync"]),
        .library(name: "ZeroMQ", targets: ["ZeroMQ"]),
        .library(name: "TouchSyncCore", targets: ["TouchSyncCore"]),
        .library(name: "TouchSyncWire", targets: ["TouchSyncWire"]),
        .library(name: "TouchSyncClientCore", targets: ["TouchSyncClientCore"]),
        .library(name: "TouchSyncClient", targets: ["TouchSyncClient"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.81.0"),
        .package(url: "https://github.com/apple/swift-collections.git", from: "1.1.0"),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.0"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.27.0"),
        .package(url: "https://github.com/apple/swift-protobuf.git", from: "1.28.0"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.6.0"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.5.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.6.0"),
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift.git", from: "0.1.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.0"),
        .package(url: "https://github.com/x-sheep/swift-property-based.git", from: "2.0.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.0"),
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.35.0"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
    ],
    targets: [
        .systemLibrary(
            name: "CZeroMQ",
            pkgConfig: "libzmq",
            providers: [.apt(["libzmq3-dev"])]
        ),
        .target(
            name: "ZeroMQ",
            dependencies: ["CZeroMQ", "TouchSyncWaiting"],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "TouchSyncCore",
            swiftSettings: swiftSettings
        ),
        .target(
            name: "TouchSyncSimulation",
            dependencies: ["TouchSyncCore"],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "TouchSyncWire",
            dependencies: [
                "TouchSyncCore",
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
            ],
            exclude: ["Generated/README.md"],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "TouchSyncTUIO",
            dependencies: ["TouchSyncCore"],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "TouchSyncAccessModel",
            swiftSettings: swiftSettings
        ),
        .target(
            name: "TouchSyncAccess",
            dependencies: ["TouchSyncAccessModel"],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "TouchSyncRender",
            dependencies: ["TouchSyncCore"],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "TouchSyncHubCore",
            dependencies: [
                "TouchSyncAccessModel",
                "TouchSyncCore",
                "TouchSyncWire",
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "TouchSyncJournal",
            dependencies: [
                "TouchSyncCore",
                "TouchSyncHubCore",
                "TouchSyncWire",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "TouchSyncHub",
            dependencies: [
                "TouchSyncWaiting",
                "TouchSyncAccess",
                "TouchSyncClientCore",
                "TouchSyncHubCore",
                "ZeroMQ",
                "TouchSyncCore",
                "TouchSyncWire",
                "TouchSyncJournal",
                "TouchSyncStore", "TouchSyncStoreCore",
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "TouchSyncClientCore",
            dependencies: ["TouchSyncCore", "TouchSyncWire", "TouchSyncAccessModel"],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "TouchSyncClient",
            dependencies: [
                "TouchSyncWaiting",
                "TouchSyncAccess",
                "ZeroMQ",
                "TouchSyncCore",
                "TouchSyncClientCore",
                "TouchSyncWire",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "HeapModule", package: "swift-collections"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "TouchSyncWebWire",
            dependencies: ["TouchSyncCore", "TouchSyncWire"],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "TouchSyncGatewayCore",
            dependencies: ["TouchSyncWebWire"],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "TouchSyncWeb",
            dependencies: [
                "TouchSyncWaiting",
                "TouchSyncAccess",
                "TouchSyncWebWire",
                "TouchSyncGatewayCore",
                "TouchSyncRender",
                "TouchSyncCore",
                "TouchSyncWire",
                "TouchSyncClient",
                "ZeroMQ",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "NIOHTTPTypesHTTP1", package: "swift-nio-extras"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            resources: [.copy("Page")],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "TouchSyncBrowser",
            swiftSettings: swiftSettings
        ),
        .target(
            name: "TouchSyncLoad",
            dependencies: [
                "TouchSyncWaiting",
                "TouchSyncAccess",
                "TouchSyncCore",
                "TouchSyncJournal",
                "TouchSyncStore", "TouchSyncStoreCore",
                "TouchSyncWire",
                "TouchSyncSimulation",
                "TouchSyncHub",
                "TouchSyncHubCore",
                "TouchSyncClient",
                "TouchSyncWebWire",
                "ZeroMQ",
                .product(name: "Histogram", package: "hdrhistogram-swift"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        // Awaiting what another thread or task provides: a value that arrives once, a consumer's queue.
        .target(
            name: "TouchSyncWaiting",
            swiftSettings: swiftSettings
        ),
        // The board store's lease rules, without I/O.
        .target(
            name: "TouchSyncStoreCore",
            dependencies: ["TouchSyncAccessModel", "TouchSyncCore", "TouchSyncHubCore"],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "TouchSyncStore",
            dependencies: [
                "TouchSyncWaiting",
                "TouchSyncAccess",
                "TouchSyncCore",
                "TouchSyncHubCore",
                "TouchSyncStoreCore",
                "TouchSyncWire",
                "TouchSyncJournal",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "TouchSyncTUIOBridge",
            dependencies: [
                "TouchSyncWaiting",
                "TouchSyncTUIO", "TouchSyncAccess", "TouchSyncClient", "TouchSyncCore", "ZeroMQ",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "TouchSyncCommands",
            dependencies: [
                "TouchSyncWaiting",
                "TouchSyncAccess",
                "TouchSyncTUIO",
                "TouchSyncTUIOBridge",
                "TouchSyncStore",
                "ZeroMQ",
                "TouchSyncJournal",
                "TouchSyncRender",
                "TouchSyncCore",
                "TouchSyncSimulation",
                "TouchSyncWire",
                "TouchSyncHub",
                "TouchSyncHubCore",
                "TouchSyncClient",
                "TouchSyncLoad",
                "TouchSyncWeb",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "touchsync-browser-bench",
            dependencies: [
                "TouchSyncBrowser", "TouchSyncWeb", "TouchSyncHub", "TouchSyncHubCore", "TouchSyncClient", "TouchSyncCore", "ZeroMQ",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "touchsync",
            dependencies: ["TouchSyncCommands"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "ZeroMQTests",
            dependencies: ["ZeroMQ"],
            swiftSettings: swiftSettings
        ),
        // Test support: property checks in which a thrown error fails the test.
        .target(
            name: "PropertyChecks",
            dependencies: [.product(name: "PropertyBased", package: "swift-property-based")],
            path: "Tests/PropertyChecks",
            swiftSettings: swiftSettings
        ),
        // Test support shared by the test targets: free loopback ports from one
        // registry, TestFailure, eventually, temporary folders.
        .target(
            name: "TestSupport",
            path: "Tests/TestSupport",
            swiftSettings: swiftSettings
        ),
        // Test support for tests that start processes: children, the built
        // binary, shells, network namespaces, HTTP, a PostgreSQL of a test's own.
        .target(
            name: "ProcessTestSupport",
            dependencies: ["TestSupport", "TouchSyncAccess", "TouchSyncWire", "ZeroMQ"],
            path: "Tests/ProcessTestSupport",
            swiftSettings: swiftSettings
        ),
        // Test support for the gateway and the page: a tab over a WebSocket, a person's actions in Chromium.
        .target(
            name: "WebTestSupport",
            dependencies: [
                "TestSupport", "TouchSyncBrowser", "TouchSyncLoad", "TouchSyncWaiting", "TouchSyncWebWire",
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            path: "Tests/WebTestSupport",
            swiftSettings: swiftSettings
        ),
        // A HubCore driven by hand on a manual clock (the hub core's and the client core's tests).
        .target(
            name: "HubCoreHarness",
            dependencies: ["TouchSyncAccess", "TouchSyncCore", "TouchSyncHubCore", "TouchSyncJournal", "TouchSyncWire"],
            path: "Tests/HubCoreHarness",
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "TouchSyncClientCoreTests",
            dependencies: [
                "HubCoreHarness", "PropertyChecks",
                "TouchSyncClientCore", "TouchSyncCore", "TouchSyncHubCore", "TouchSyncSimulation", "TouchSyncWire",
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "TouchSyncCoreTests",
            dependencies: [
                "TouchSyncCore",
                "TouchSyncSimulation",
                "PropertyChecks",
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "TouchSyncWireTests",
            dependencies: [
                "TouchSyncCore",
                "TouchSyncSimulation",
                "TouchSyncWire",
                "PropertyChecks",
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "TouchSyncHubCoreTests",
            dependencies: [
                "HubCoreHarness",
                "TouchSyncClientCore",
                "TouchSyncHubCore", "TouchSyncAccess", "TouchSyncCore", "TouchSyncJournal", "TouchSyncSimulation", "TouchSyncWire",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
                "PropertyChecks",
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "TouchSyncHubTests",
            dependencies: [
                "ZeroMQ",
                "TouchSyncBrowser",
                "TouchSyncJournal",
                "TouchSyncCore",
                "TouchSyncSimulation",
                "TouchSyncWire",
                "TouchSyncHub",
                "TouchSyncHubCore",
                "TouchSyncClient",
                "TestSupport",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "TouchSyncJournalTests",
            dependencies: [
                "TouchSyncJournal", "TouchSyncCore", "TouchSyncHubCore", "TouchSyncSimulation", "TouchSyncWire",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "TouchSyncAccessTests",
            dependencies: ["TouchSyncAccess", "ZeroMQ"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "TouchSyncTUIOTests",
            dependencies: ["TouchSyncTUIO", "TouchSyncCore"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "TouchSyncRenderTests",
            dependencies: ["TouchSyncRender", "TouchSyncCore"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "TouchSyncLoadTests",
            dependencies: [
                "TouchSyncLoad", "TouchSyncCore", "TouchSyncHub", "TouchSyncHubCore", "TouchSyncWire", "ZeroMQ",
                "TouchSyncJournal", "TouchSyncSimulation", "TouchSyncClient",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "TouchSyncWaitingTests",
            dependencies: ["TouchSyncWaiting"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "TouchSyncStoreCoreTests",
            dependencies: ["TouchSyncStoreCore", "TouchSyncAccessModel", "TouchSyncCore", "TouchSyncHubCore"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "TouchSyncGatewayCoreTests",
            dependencies: ["TouchSyncGatewayCore", "TouchSyncWebWire"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "TouchSyncCommandsTests",
            dependencies: [
                "ProcessTestSupport", "TestSupport",
                "TouchSyncAccess", "TouchSyncClient", "TouchSyncCommands", "TouchSyncCore", "TouchSyncHubCore", "TouchSyncJournal",
                "TouchSyncLoad", "TouchSyncSimulation", "TouchSyncTUIO", "TouchSyncWire", "ZeroMQ",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        // The browser wire's codecs and replica (pure).
        .testTarget(
            name: "TouchSyncWebWireTests",
            dependencies: ["TestSupport", "TouchSyncCore", "TouchSyncSimulation", "TouchSyncWeb", "TouchSyncWebWire", .product(name: "NIOCore", package: "swift-nio")],
            swiftSettings: swiftSettings
        ),
        // The gateway: its channel handlers on EmbeddedChannel, the real gateway through WebSockets, the page in Chromium.
        .testTarget(
            name: "TouchSyncWebTests",
            dependencies: [
                "WebTestSupport",
                "ProcessTestSupport", "TestSupport", "TouchSyncWaiting",
                "TouchSyncAccess", "TouchSyncBrowser", "TouchSyncClient", "TouchSyncCore", "TouchSyncLoad", "TouchSyncRender", "TouchSyncSimulation",
                "TouchSyncWeb", "TouchSyncWebWire",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        // The board store against a PostgreSQL of each test's own: schema, hubs, failover, partitions, gateways.
        .testTarget(
            name: "TouchSyncStoreTests",
            dependencies: [
                "WebTestSupport",
                "ProcessTestSupport", "TestSupport",
                "TouchSyncAccess", "TouchSyncBrowser", "TouchSyncClient", "TouchSyncCore", "TouchSyncHubCore", "TouchSyncStore", "TouchSyncWebWire",
                "TouchSyncWire",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
    ]
)

// The folder layout shows the layers: Sources/Cores (pure: no I/O, no
// clock, no threads; tested by properties), Sources/Adapters (ZeroMQ,
// files, HTTP: the cores' events from real I/O) and Sources/Tools (the CLI,
// load runs and benchmarks, the Chromium driver for tests and benches).
let layers: [String: [String]] = [
    "Cores": [
        "TouchSyncCore", "TouchSyncSimulation", "TouchSyncWire", "TouchSyncHubCore", "TouchSyncClientCore", "TouchSyncWebWire",
        "TouchSyncGatewayCore", "TouchSyncAccessModel", "TouchSyncRender", "TouchSyncTUIO", "TouchSyncStoreCore",
    ],
    "Adapters": [
        "CZeroMQ", "ZeroMQ", "TouchSyncWaiting", "TouchSyncAccess", "TouchSyncJournal", "TouchSyncStore", "TouchSyncHub", "TouchSyncClient", "TouchSyncWeb",
        "TouchSyncTUIOBridge",
    ],
    "Tools": ["TouchSyncLoad", "TouchSyncBrowser", "TouchSyncCommands", "touchsync", "touchsync-browser-bench"],
]
for target in package.targets where target.type != .test && target.path == nil {
    guard let layer = layers.first(where: { $0.value.contains(target.name) })?.key else {
        fatalError("\(target.name) belongs to no layer: add it to `layers` in Package.swift")
    }
    target.path = "Sources/\(layer)/\(target.name)"
}
// A core depends only on cores and on pure libraries (no I/O, no clock):
// checked whenever the package is read, so a core that reaches for an
// adapter (a file reader, a socket) does not build.
let coreProducts: Set<String> = ["SwiftProtobuf"]
for target in package.targets where layers["Cores"]!.contains(target.name) {
    for dependency in target.dependencies {
        switch dependency {
        case .targetItem(let name, _), .byNameItem(let name, _):
            if !layers["Cores"]!.contains(name) { fatalError("core \(target.name) depends on \(name), which is not a core (Package.swift `layers`)") }
        case .productItem(let name, _, _, _):
            if !coreProducts.contains(name) { fatalError("core \(target.name) depends on product \(name): a core may use only \(coreProducts.sorted())") }
        @unknown default:
            fatalError("core \(target.name): a kind of dependency this check does not know")
        }
    }
}

// Fuzz targets (Fuzz/): built only for `make fuzz` (TOUCHSYNC_FUZZ=1, every
// module compiled with -sanitize=fuzzer,address in its own build folder), so
// the ordinary build and CI never compile them.
if ProcessInfo.processInfo.environment["TOUCHSYNC_FUZZ"] != nil {
    let fuzzTargets: [(String, [Target.Dependency])] = [
        ("FuzzHubCore", ["TouchSyncHubCore", "TouchSyncAccess", "TouchSyncCore", "TouchSyncJournal", "TouchSyncWire"]),
        ("FuzzDiffStream", ["TouchSyncCore", "TouchSyncWire"]),
        ("FuzzSnapshot", ["TouchSyncCore", "TouchSyncWire"]),
        ("FuzzJournal", ["TouchSyncJournal", "TouchSyncHubCore"]),
        ("FuzzOSC", ["TouchSyncTUIO"]),
        ("FuzzBrowserWire", ["TouchSyncWebWire"]),
    ]
    package.targets.append(.target(name: "FuzzSupport", path: "Fuzz/Sources/FuzzSupport", swiftSettings: swiftSettings))
    for (name, dependencies) in fuzzTargets {
        package.targets.append(
            .executableTarget(
                name: name, dependencies: ["FuzzSupport"] + dependencies, path: "Fuzz/Sources/\(name)", swiftSettings: swiftSettings))
    }
}

// An image build copies Package.swift, Sources and proto only (Dockerfile,
// .dockerignore): without Tests/ the package is its products alone (the test
// targets and the test-only modules under Tests/ would name missing folders).
if !FileManager.default.fileExists(atPath: Context.packageDirectory + "/Tests") {
    package.targets.removeAll { $0.type == .test || ($0.path?.hasPrefix("Tests/") ?? false) }
}
