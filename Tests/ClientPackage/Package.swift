// swift-tools-version: 6.1
// A package outside TouchSync that uses it as a Swift app would: it depends
// on the TouchSyncClient product by path and draws one stroke through a hub
// (scripts/check-client-package.sh builds and runs it against a real hub in
// `make test`).
import PackageDescription

let package = Package(
    name: "ClientPackage",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "TouchSync", path: "../.."),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.6.0"),
    ],
    targets: [
        .executableTarget(
            name: "draw-one-stroke",
            dependencies: [
                .product(name: "TouchSyncClient", package: "TouchSync"),
                .product(name: "Logging", package: "swift-log"),
            ]
        )
    ]
)
