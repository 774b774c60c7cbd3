// swift-tools-version:6.0
import PackageDescription

// Dependencies point one way: recordsd -> RecordsServer -> Records -> Postgres -> CLibPQ.
// The CLI, records, speaks only the protocol: it depends on libedit, not on the server's code.
let package = Package(
    name: "recordsd",
    platforms: [.macOS(.v13)],
    products: [
        .executable(name: "recordsd", targets: ["recordsd"]),
        .executable(name: "records", targets: ["records"]),
    ],
    targets: [
        .systemLibrary(
            name: "CLibPQ",
            pkgConfig: "libpq",
            providers: [.apt(["libpq-dev"])]
        ),
        .systemLibrary(
            name: "CLibEdit",
            pkgConfig: "libedit",
            providers: [.apt(["libedit-dev"])]
        ),
        .target(name: "CSystem"),
        .target(name: "Postgres", dependencies: ["CLibPQ"]),
        .target(name: "Records", dependencies: ["Postgres"]),
        .target(name: "RecordsServer", dependencies: ["Records", "CSystem"]),
        .executableTarget(name: "recordsd", dependencies: ["RecordsServer", "Records", "Postgres"]),
        .executableTarget(name: "records", dependencies: ["CLibEdit"]),
        .testTarget(name: "RecordsTests", dependencies: ["Records", "Postgres"]),
        .testTarget(name: "IntegrationTests", dependencies: ["Records", "Postgres"]),
    ],
    // Swift 5 language mode: connections and sessions are confined by hand-off (a worker thread
    // or the event loop owns each at a time), which strict Sendable checking cannot express.
    swiftLanguageModes: [.v5]
)
