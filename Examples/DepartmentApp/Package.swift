// swift-tools-version:6.0
import PackageDescription

// What the Department/Employee app of the documents does, as a program on RecordsClient:
//   swift run --package-path Examples/DepartmentApp DepartmentApp records://127.0.0.1:7878
let package = Package(
    name: "DepartmentApp",
    platforms: [.macOS(.v13)],
    dependencies: [.package(name: "recordsd", path: "../..")],
    targets: [
        .executableTarget(name: "DepartmentApp", dependencies: [.product(name: "RecordsClient", package: "recordsd")]),
        // bench/client_library.sh: GET through the library beside bench/loadgen.c.
        .executableTarget(name: "GetBench", dependencies: [.product(name: "RecordsClient", package: "recordsd")]),
    ],
    swiftLanguageModes: [.v6]
)
