import Foundation

// MARK: - FORMAT JSON: the descriptive replies for programs, one JSON object a line

extension Session {
    func entitiesJSON(_ model: Model) -> Reply {
        let served: [String] = model.entities.map { entity in
            JSON.Value.object([
                ("name", .string(entity.name)), ("served", .bool(true)),
                ("attributes", .int(entity.attributes.count)), ("relationships", .int(entity.relationships.count)),
                ("rowLevelSecurity", .bool(entity.hasRowSecurity)),
            ]).text
        }
        let unserved: [String] = model.unserved.map { table in
            JSON.Value.object([("name", .string(table.name)), ("served", .bool(false)), ("reason", .string(table.reason))]).text
        }
        return .ok("\(model.entities.count) entities", lines: served + unserved)
    }

    func describeJSON(_ entity: Entity) -> Reply {
        let attributes: [JSON.Value] = entity.attributes.map { a in
            .object([
                ("name", .string(a.name)), ("type", .string(a.kind.name)), ("sqlType", .string(a.declaredType)),
                ("required", .bool(a.isRequired && (!entity.triggersMayRewriteInserts || a.isPrimaryKey))), ("nullable", .bool(!a.isNotNull)), ("key", .bool(a.isPrimaryKey)), ("unique", .bool(a.isUnique)),
                ("generated", .bool(a.isGenerated)), ("default", .optional(a.defaultValue)),
            ])
        }
        let relationships: [JSON.Value] = entity.relationships.map { r in
            .object([
                ("name", .string(r.name)), ("target", .string(r.target)), ("toMany", .bool(r.isToMany)),
                ("required", .bool(r.isRequired)), ("inverse", .string(r.inverse)), ("deleteRule", .string(r.deleteRule.rawValue)),
            ])
        }
        let object = JSON.Value.object([
            ("name", .string(entity.name)), ("key", .array(entity.key.map { .string($0.name) })),
            ("attributes", .array(attributes)), ("relationships", .array(relationships)),
            ("rowLevelSecurity", .bool(entity.hasRowSecurity)),
        ])
        return .ok(entity.name, lines: [object.text])
    }

    /// SAVE's `#e1 employee 42` lines as `{"ref":"#e1","entity":"employee","key":"42"}`.
    static func savedJSON(_ reply: Reply) -> Reply {
        guard case .ok = reply.status else {
            var json = reply
            if let lines = reply.jsonLines { json.lines = lines }
            return json
        }
        var json = reply
        json.lines = reply.lines.map(SavePlan.savedLineJSON)
        return json
    }
}
