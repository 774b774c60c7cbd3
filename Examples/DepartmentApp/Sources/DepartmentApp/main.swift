import Foundation
import RecordsClient

// The Department/Employee app: add a department with employees, move one, remove one from its
// department, delete the department and watch the cascade. Prints what it did; exits 1 when
// the server disagrees with what it expected.

struct Department: RecordsEntity {
    static let entityName = "department"
    var id: Int
    var name: String
    var number: Int
}

struct Employee: RecordsEntity {
    static let entityName = "employee"
    var id: Int
    var firstName: String
    var lastName: String
    var department: Int?
}

func check(_ condition: Bool, _ what: String) {
    print((condition ? "ok    " : "FAILED ") + what)
    if !condition { exit(1) }
}

let url = CommandLine.arguments.dropFirst().first ?? "records://127.0.0.1:7878"
let app = try await RecordsClient.connect(url)
let events = try await RecordsClient.watch(url, "employee")

// A department with three employees, saved as one unit.
let research = try await app.insert("department", ["name": "Research", "number": 42])
let support = try await app.insert("department", ["name": "Support", "number": 43])
for (first, last) in [("Ada", "Byron"), ("Alan", "Turing"), ("Grace", "Hopper")] {
    try await app.insert("employee", ["first_name": first, "last_name": last, "gender": 1, "department": research])
}
let saved = try await app.save()
check(saved.ids.count == 5, "saved a department with employees: \(saved.summary)")
guard let researchID = saved.ids[research].flatMap(Int.init), let supportID = saved.ids[support].flatMap(Int.init) else { exit(1) }

// Move one to another department; take one out of any.
let staff = try await app.find(Employee.self, where: "department.name == %@", "Research", orderBy: ["last_name"])
check(staff.map(\.lastName) == ["Byron", "Hopper", "Turing"], "found Research's staff by a key path")
try await app.update("employee", staff[1].id, ["department": supportID])
try await app.update("employee", staff[2].id, ["department": Optional<Int>.none])
try await app.save()
check(try await app.count("employee", where: "department == nil") == 1, "one employee belongs to no department")

// Delete the department: its employees go with it (cascade), and the watcher hears it.
try await app.delete("department", researchID)
let removed = try await app.save()
check(removed.summary.contains("1 deleted, 1 cascaded"), "deleted Research with its employee: \(removed.summary)")
var heard: [String] = []
for try await event in events {
    heard.append("\(event.operation.rawValue) \(event.key)")
    if event.operation == .deleted { break }
}
check(heard.last == "deleted \(staff[0].id)", "the watcher saw the cascade: \(heard.joined(separator: ", "))")
await app.close()
