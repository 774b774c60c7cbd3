import Foundation
import RecordsProtocol

// MARK: - HELP, INFO, ENTITIES, DESCRIBE

extension Session {
    func help(_ verbName: String?) throws(CommandError) -> Reply {
        guard let verbName else {
            let width = 44
            let lines = Verb.allCases.flatMap { verb -> [String] in
                verb.syntax.count <= width
                    ? [verb.syntax.padding(toLength: width, withPad: " ", startingAt: 0) + "  " + verb.summary]
                    : [verb.syntax, String(repeating: " ", count: width + 2) + verb.summary]
            }
            return .ok("\(Verb.allCases.count) verbs; HELP <verb> for one, with an example", lines: lines + [
                "values: 42  -1.5  \"text\" (\\\" \\\\ \\n \\t \\uXXXX)  true  false  nil  #ref;  dates as \"2024-05-31T14:30:00Z\", binary as base64",
            ])
        }
        guard let verb = Verb(rawValue: verbName.uppercased()) else {
            throw CommandError(.unknown, "unknown verb '\(verbName)'\(CommandParser.suggestion(for: verbName)): type HELP for the list")
        }
        let facts = verb.facts
        let touches = switch facts.access {
        case .session: "the session's own state"
        case .reads: "reads the database, with the pending changes"
        case .edits: "adds pending changes"
        case .writes: "writes the database"
        }
        var lines = ["usage: " + verb.syntax, verb.summary, "example: " + verb.example,
                     "needs: " + (facts.role.map { "the \($0.name) role" } ?? "nothing (open before AUTH)") + "; " + touches]
        if verb == .find || verb == .count {
            lines += [
                "predicates: == != < <= > >= (also = <>), BEGINSWITH ENDSWITH CONTAINS LIKE (* ?) MATCHES (regex), [c] case-insensitive",
                "            IN {a, b}  BETWEEN {low, high}  == nil  AND OR NOT (&& || !)  ( )",
                "key paths:  department.name == \"Sales\"   ANY employees.age > 60   ALL ...  NONE ...   employees.@count > 3",
            ]
        }
        return .ok(verb.rawValue, lines: lines)
    }

    func info() -> Reply {
        let status = context.status
        let uptime = Int(Date().timeIntervalSince(context.startedAt))
        var lines = [
            "version: \(ServerContext.version)",
            "uptime: \(uptime)s",
            "sessions: \(status.sessions)",
            "database: \(context.databaseDescription)",
            context.topology.summary,
        ]
        if let pool = status.pool {
            lines.append("pool: size \(pool.size), open \(pool.open), busy \(pool.busy), queued \(pool.queued)")
        }
        lines.append("session: s\(id)")
        let changes = unit.current.count
        lines.append("unit: \(changes == 0 ? "no pending changes" : "\(changes) pending change(s)"), \(unit.depth) nested scratchpad(s)")
        guard jsonReplies else { return .ok("recordsd \(ServerContext.version)", lines: lines) }
        // For programs: each fact a field, numbers as numbers.
        var fields: [(String, JSON.Value)] = [
            ("version", .string(ServerContext.version)), ("uptime_seconds", .int(uptime)), ("sessions", .int(status.sessions)),
            ("database", .string(context.databaseDescription)),
        ]
        let topology = context.topology
        if let look = topology.last {
            fields += [("primary", .string(look.primary)), ("standbys", .int(look.standbys)),
                       ("synchronous_standbys", .int(look.synchronousStandbys)),
                       ("replay_lag_bytes", look.lagBytes.map { .int(Int($0)) } ?? .null)]
        }
        fields.append(("primary_changes", .int(topology.primaryChanges)))
        if let pool = status.pool {
            fields.append(("pool", .object([("size", .int(pool.size)), ("open", .int(pool.open)), ("busy", .int(pool.busy)), ("queued", .int(pool.queued))])))
        }
        fields += [("session", .string("s\(id)")), ("pending_changes", .int(changes)), ("nested_scratchpads", .int(unit.depth))]
        return .ok("recordsd \(ServerContext.version)", lines: [JSON.Value.object(fields).text])
    }

    func entities(_ model: Model) -> Reply {
        let width = max(6, (model.entities.map(\.name) + model.unserved.map(\.name)).map(\.count).max() ?? 0)
        var lines = model.entities.map { entity in
            entity.name.padding(toLength: width, withPad: " ", startingAt: 0)
                + "  " + plural(entity.attributes.count, "attribute") + ", " + plural(entity.relationships.count, "relationship")
                + (entity.hasRowSecurity ? ", row-level security" : "")
        }
        lines += model.unserved.map { "\($0.name.padding(toLength: width, withPad: " ", startingAt: 0))  not served: \($0.reason)" }
        return .ok("\(model.entities.count) entities", lines: lines)
    }

    func describe(_ name: String, model: Model) throws(CommandError) -> Reply {
        let entity = try entity(name, model)
        var rows: [[String]] = [["attribute", "type", "required", "default", "unique"]]
        for a in entity.attributes {
            rows.append([
                a.name + (a.isPrimaryKey ? " (key)" : ""),
                "\(a.kind.name) (\(a.declaredType))",
                // NOT NULL without a default, where a BEFORE INSERT trigger may fill it.
                a.isRequired ? (entity.triggersMayRewriteInserts && !a.isPrimaryKey ? "trigger" : "yes") : "no",
                a.defaultValue ?? "-",
                a.isUnique ? "yes" : "no",
            ])
        }
        var lines = table(rows)
        if !entity.relationships.isEmpty {
            var rels: [[String]] = [["relationship", "target", "kind", "inverse", "delete rule"]]
            for r in entity.relationships {
                rels.append([r.name, r.target, r.isToMany ? "to-many" : (r.isRequired ? "to-one (required)" : "to-one"), r.inverse,
                             r.isToMany ? "\(r.deleteRule.rawValue) (on delete of this)" : r.deleteRule.rawValue])
            }
            lines.append("")
            lines += table(rels)
        }
        if entity.hasRowSecurity {
            lines += ["", "row-level security: PostgreSQL's policies decide which records each user reads and writes"]
        }
        return .ok("\(entity.name): " + plural(entity.attributes.count, "attribute") + ", " + plural(entity.relationships.count, "relationship")
                   + (entity.hasRowSecurity ? ", row-level security" : ""), lines: lines)
    }

    func plural(_ count: Int, _ noun: String) -> String { "\(count) \(noun)\(count == 1 ? "" : "s")" }

    /// Columns padded to their widest cell, two spaces apart.
    private func table(_ rows: [[String]]) -> [String] {
        let widths = rows[0].indices.map { column in rows.map { $0[column].count }.max() ?? 0 }
        return rows.map { row in
            row.enumerated().map { i, cell in i == row.count - 1 ? cell : cell.padding(toLength: widths[i], withPad: " ", startingAt: 0) }
                .joined(separator: "  ")
        }
    }
}
