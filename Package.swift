// swift-tools-version:6.0
import PackageDescription

// Dependencies point one way: recordsd -> RecordsServer -> Records -> Postgres -> CLibPQ, and
// Records -> RecordsProtocol (the wire: verbs, framer, replies, error codes, values, notices; no
// dependencies, re-exported by Records). The CLI, records, speaks only
// the protocol through the library RecordsClient (RecordsProtocol, TLS, Foundation), and
// libedit; neither depends on the server's code.
let package = Package(
    name: "recordsd",
    platforms: [.macOS(.v13)],
    products: [
        .executable(name: "recordsd", targets: ["recordsd"]),
        .executable(name: "records", targets: ["records"]),
        .library(name: "RecordsClient", targets: ["RecordsClient"]),
    ],
    targets: [
        .systemLibrary(
            name: "CLibPQ",
            pkgConfig: "libpq",
            providers: [.apt(["libpq-dev"])]
        ),
        .systemLibrary(
            name: "CLibSSL",
            pkgConfig: "openssl",
            providers: [.apt(["libssl-dev"])]
        ),
        .systemLibrary(
            name: "CLibEdit",
            pkgConfig: "libedit",
            providers: [.apt(["libedit-dev"])]
        ),
        .target(name: "CSystem"),
        .target(name: "Postgres", dependencies: ["CLibPQ"]),
        .target(name: "RecordsProtocol"),
        .target(name: "TLS", dependencies: ["CLibSSL"]),
        // For programs, and the one client in the repo (CLI, tests): the protocol over a socket,
        // Foundation and the system's OpenSSL for TLS; no server code, no libpq.
        .target(name: "RecordsClient", dependencies: ["RecordsProtocol", "TLS"]),
        .target(name: "Records", dependencies: ["RecordsProtocol", "Postgres"],
                resources: [.embedInCode("Watch/ChangeFeed.sql")]),
        .target(name: "RecordsServer", dependencies: ["Records", "RecordsProtocol", "Postgres", "TLS", "CSystem"]),
        .executableTarget(name: "recordsd", dependencies: ["RecordsServer", "Records", "RecordsProtocol", "Postgres", "TLS", "CSystem"]),
        .executableTarget(name: "records", dependencies: ["RecordsClient", "RecordsProtocol", "CLibEdit"]),
        .testTarget(name: "RecordsTests", dependencies: ["Records", "RecordsProtocol", "Postgres"]),
        .testTarget(name: "RecordsClientTests", dependencies: ["RecordsClient"]),
        .testTarget(name: "RecordsServerTests", dependencies: ["RecordsServer", "Records"]),
        .testTarget(name: "IntegrationTests", dependencies: ["Records", "Postgres", "TLS", "RecordsClient"]),
    ],
    // Swift 6: every thread hop is checked. Sessions and connections never cross one: pool
    // workers get Sendable work and send Sendable messages back to the event loop.
    swiftLanguageModes: [.v6]
)
