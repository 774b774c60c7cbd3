import Postgres

extension WorkContext {
    /// An update that changes a stored record's key: what the records pointing at the old key
    /// will do, by each foreign key's ON UPDATE rule, counted as the database holds them now —
    /// one line each, as a delete's preview (`cascade tools_categories.tool 2`, `deny
    /// "Shift Plan".from 1`) — and the reply's summary of them.
    func keyChangePreview(_ entity: Entity, _ key: RecordKey, _ fields: [FieldAssignment], stored: [String: String?],
                          model: Model) throws -> (lines: [String], effects: String) {
        let changed = Set(fields.filter { field in
            guard entity.keyColumns.contains(field.column) else { return false }
            if case .text(let text) = field.value, let old = stored[field.column], old == text { return false }
            return true
        }.map(\.column))
        guard !changed.isEmpty else { return ([], "") }
        var lines: [String] = []
        var cascaded = 0, nullified = 0, denied = 0
        for foreignKey in model.foreignKeys(to: entity.name) where !Set(foreignKey.referencedColumns).isDisjoint(with: changed) {
            guard let source = model.entity(exactly: foreignKey.entity) else { continue }
            var sql = SQLText()
            let conditions = zip(foreignKey.columns, foreignKey.referencedColumns).map { column, referenced in
                let type = source.columns.first { $0.column == column }?.sqlType ?? "text"
                return "\(SQL.identifier(column)) = \(sql.bind(stored[referenced] ?? nil))::\(type)"
            }
            sql.text = "SELECT count(*) FROM \(model.table(source)) WHERE " + conditions.joined(separator: " AND ")
            let count = try retryingOnce { try connection.query(sql.text, sql.parameters) }.int(0, 0) ?? 0
            guard count > 0 else { continue }
            let word: String
            switch foreignKey.updateRule {
            case .cascade: cascaded += count; word = "cascade"
            case .nullify: nullified += count; word = "nullify"
            case .setDefault: nullified += count; word = "set default"
            case .deny: denied += count; word = "deny"
            }
            lines.append("\(word) \(foreignKey.label) \(count)")
        }
        var effects = ", the key changes"
        if cascaded > 0 { effects += ", cascades to \(cascaded)" }
        if nullified > 0 { effects += ", nullifies \(nullified)" }
        if denied > 0 { effects += ", DENIED by \(denied): SAVE will fail unless they move first" }
        return (lines, effects)
    }
}
