/// The statements that write a change set once every pending insert's key is known: pure,
/// so the order and the batching are tested without a database.
///
/// - Inserts go in multi-row statements (one per entity, each column one array parameter),
///   ordered so that a record is written after the records it points at; records of one table
///   that point at each other go in one statement (PostgreSQL checks its keys at its end).
///   References to a later statement are written as nil and set right after all inserts;
///   through a DEFERRABLE key, its check is deferred to COMMIT instead; through a required,
///   immediate key, the unit cannot be written, and says why.
/// - Updates by key, one statement each, then changes by predicate in the order typed.
/// - Each insert is written exactly once.
struct WritePlan {
    /// A statement and the changes it writes, so a failure can name them.
    struct Write: Sendable {
        var statement: Statement
        var changes: [ChangeID]
        /// How the failure names what the statement wrote (`#e1`, `employee 7`).
        var records: [String]
        var entity: String
        /// An insert of one row that comes back as (its key is the one sent, the key as text...),
        /// or as no row when a trigger skipped it.
        var readsBackKeys = false
        /// A multi-row insert whose parameters are one array a column, a row an element, into a
        /// table whose triggers keep every row: statements of the same text from several saves
        /// may go as one, their arrays joined (`SaveGroup`), each save's rows counted as sent.
        var joinable = false
    }

    let model: Model
    let rowsPerStatement: Int
    let copyRefused: Set<String>
    var inserts: [Write] = []
    /// Nil-then-set references (records that point at each other).
    var fixups: [Write] = []
    var updates: [Write] = []
    var bulkUpdates: [Write] = []
    /// Sequences moved past keys the client gave, so later inserts do not collide.
    var sequenceBumps: [Statement] = []
    var problems: [Problem] = []

    static let defaultRowsPerStatement = 50_000
    /// A statement of more rows than this is a COPY when its table takes one (`Entity.takesCopy`).
    static let copiedAbove = 1_000

    /// - Parameters:
    ///   - keys: every key column's value for every pending insert (given or assigned).
    ///   - skip: changes left out (a read's view of an incomplete unit).
    ///   - droppedFields: fields the database wins (SAVE THEIRS), per record.
    ///   - locking: changes by predicate lock what they change in key order first (SAVE; not a
    ///     read's view, which must never wait on another session's locks).
    ///   - layout: the inserts' layout when the caller made it already (it does not depend on keys).
    ///   - copyRefused: entities whose table the catalog says no longer takes COPY.
    init(model: Model, changes: ChangeSet, keys: PendingKeys, skip: Set<ChangeID> = [],
         droppedFields: [RecordKey: Set<String>] = [:], rowsPerStatement: Int = defaultRowsPerStatement, locking: Bool = false,
         layout: InsertLayout? = nil, copyRefused: Set<String> = []) {
        self.model = model
        self.copyRefused = copyRefused
        let layout = layout ?? InsertLayout(model: model, changes: changes, skip: skip, rowsPerStatement: rowsPerStatement)
        self.rowsPerStatement = rowsPerStatement
        var resolver = Resolver(model: model, changes: changes, keys: keys)
        planInserts(layout, resolver: &resolver)
        planUpdates(changes, resolver: &resolver, skip: skip, dropped: droppedFields)
        planBulkUpdates(changes, resolver: &resolver, skip: skip, locking: locking)
        planSequenceBumps(changes, skip: skip)
        problems += resolver.problems
    }

    // MARK: - Inserts

    /// `INSERT INTO t (c1, c2) OVERRIDING SYSTEM VALUE SELECT * FROM unnest($1::type1[], $2::type2[])`:
    /// one array parameter a column, in order; kept by the model per entity and columns (a
    /// one-insert SAVE otherwise quotes, joins and numbers the same text again).
    static func unnestInsert(_ entity: Entity, columns: [String], model: Model) -> String {
        var sql = SQLText("INSERT INTO \(model.table(entity)) (\(columns.map(SQL.identifier).joined(separator: ", "))) OVERRIDING SYSTEM VALUE SELECT * FROM unnest(")
        let arrays = columns.map { column in sql.bind(nil) + "::" + (entity.columnTypes[column] ?? "text") + "[]" }
        sql.append(arrays.joined(separator: ", ") + ")")
        return sql.text
    }

    private mutating func planInserts(_ layout: InsertLayout, resolver: inout Resolver) {
        problems += layout.problems
        for statement in layout.statements { planInsert(statement, nulled: layout.nulled, resolver: &resolver) }
        planFixups(layout, resolver: resolver)
    }

    /// One statement's rows as writes: by COPY when many, row by row when a trigger may
    /// rewrite their keys or a column is an array, else one INSERT of unnested arrays.
    private mutating func planInsert(_ statement: InsertLayout.Statement, nulled: [String: [(column: String, target: String)]],
                                     resolver: inout Resolver) {
        let entity = statement.entity
        let types = entity.columnTypes
        var table: String { model.table(entity) }
        var columnList: String { statement.columns.map(SQL.identifier).joined(separator: ", ") }
        // A trigger may write another key than the one given, or skip the row: each row is
        // then inserted alone and comes back as whether its key is the one sent, and which
        // it is (`SavePlan` refuses before COMMIT if not). One statement for all would
        // return its rows in no promised order: a trigger swapping two keys would pass.
        let keyPositions = entity.key.compactMap { statement.columns.firstIndex(of: $0.name) }
        let readsBack = entity.triggersMayRewriteInserts && keyPositions.count == entity.key.count
        // Many rows go by COPY, which PostgreSQL reads faster than it unnests arrays (the
        // rows of a 1 + 10,000 unit: 52 ms against 60) at the cost of a round trip or two;
        // their text is written as the values are found.
        let copying = !readsBack && entity.takesCopy && !copyRefused.contains(entity.name) && statement.rows.count > Self.copiedAbove
        let (copyText, values) = rowValues(statement, nulled: nulled, copying: copying, resolver: &resolver)
        if copying {
            let copy = "COPY \(table) (\(columnList)) FROM STDIN"
            inserts.append(Write(statement: Statement(copy: copy, data: copyText.bytes),
                                 changes: statement.rows.map { .insert($0.ref) }, records: statement.rows.map { "#" + $0.ref },
                                 entity: entity.name))
            return
        }
        // Array-typed columns cannot travel through unnest (it would flatten them): row by row too.
        if readsBack || statement.columns.contains(where: { (types[$0] ?? "").hasSuffix("]") }) {
            for (rowIndex, row) in statement.rows.enumerated() {
                var single = SQLText("INSERT INTO \(table) (\(columnList)) OVERRIDING SYSTEM VALUE VALUES (")
                let placeholders = statement.columns.indices.map { single.bind(values[$0][rowIndex]) + "::" + (types[statement.columns[$0]] ?? "text") }
                single.append(placeholders.joined(separator: ", ") + ")")
                if readsBack {
                    single.append(" RETURNING (\(entity.keyList(alias: nil))) IS NOT DISTINCT FROM ("
                                  + keyPositions.map { placeholders[$0] }.joined(separator: ", ") + "), \(entity.keyText(alias: nil))")
                }
                inserts.append(Write(statement: single.statement, changes: [.insert(row.ref)], records: ["#" + row.ref], entity: entity.name,
                                     readsBackKeys: readsBack))
            }
            return
        }
        let text = model.inserts.value([entity.name] + statement.columns) { Self.unnestInsert(entity, columns: statement.columns, model: model) }
        inserts.append(Write(statement: Statement(text, values.map { SQL.arrayLiteral($0) }), changes: statement.rows.map { .insert($0.ref) },
                             records: statement.rows.map { "#" + $0.ref }, entity: entity.name,
                             joinable: !entity.triggersMayRewriteInserts))
    }

    /// The statement's values: COPY text when `copying`, else one array of values a column.
    private func rowValues(_ statement: InsertLayout.Statement, nulled: [String: [(column: String, target: String)]], copying: Bool,
                           resolver: inout Resolver) -> (CopyText, [[String?]]) {
        let entity = statement.entity
        var copyText = CopyText(rows: copying ? statement.rows.count : 0)
        var values: [[String?]] = Array(repeating: [], count: copying ? 0 : statement.columns.count)
        for index in values.indices { values[index].reserveCapacity(statement.rows.count) }
        let keyColumns = entity.keyColumns
        // A row's known values (a key or two) placed by column: the key's columns come first.
        var knownAt = [String?](repeating: nil, count: statement.columns.count)
        // Where each column's field is in a row typed like the last one (a run of a load):
        // found once a run, not searched for a value.
        var shape: [String]?
        var fieldAt: [Int?] = []
        for (row, place) in zip(statement.rows, statement.places) {
            let later = nulled.isEmpty ? [] : Set((nulled[row.ref] ?? []).map(\.column))
            for index in knownAt.indices { knownAt[index] = nil }
            for (column, value) in resolver.keys[place]?.values ?? [:] {
                if let index = statement.columns.firstIndex(of: column) { knownAt[index] = value }
            }
            if shape == nil || !row.sets(exactly: shape!) {
                shape = row.fields.map(\.column)
                fieldAt = statement.columns.map { column in row.fields.firstIndex { $0.column == column } }
            }
            for (index, column) in statement.columns.enumerated() {
                let value: String?
                if !later.isEmpty && later.contains(column) {
                    value = nil
                } else {
                    let given = fieldAt[index].map { row.fields[$0].value }
                    // A key or a value given before SAVE, else the field's.
                    if let assigned = knownAt[index], !isRef(given) || keyColumns.contains(column) {
                        value = assigned
                    } else {
                        value = resolver.bind(given ?? .null, column: column, entity: entity, for: .insert(row.ref))
                    }
                }
                if copying { copyText.append(value) } else { values[index].append(value) }
            }
            if copying { copyText.endRow() }
        }
        return (copyText, values)
    }

    /// The references written as nil, set now that every record exists: one statement per
    /// entity and column (a record a statement when diagnosing).
    private mutating func planFixups(_ layout: InsertLayout, resolver: Resolver) {
        let nulled = layout.nulled
        var byColumn: [String: [String: [(ref: String, target: String)]]] = [:]
        var order: [(String, String)] = []
        for statement in layout.statements {
            for row in statement.rows {
                for (column, target) in nulled[row.ref] ?? [] {
                    if byColumn[statement.entity.name]?[column] == nil { order.append((statement.entity.name, column)) }
                    byColumn[statement.entity.name, default: [:]][column, default: []].append((row.ref, target))
                }
            }
        }
        for (entityName, column) in order {
            guard let entity = model.entity(exactly: entityName), let relationship = entity.relationship(column: column) else { continue }
            let all = byColumn[entityName]![column]!
            for pair in all where resolver.referenced(by: relationship, target: pair.target) == nil {
                problems.append(Problem(change: .insert(pair.ref), message:
                    "#\(pair.target) has no \(relationship.referencedColumn) yet for \(entity.name).\(relationship.name) to point at: give it one"))
            }
            for pairs in rowsPerStatement == 1 ? all.map({ [$0] }) : [all] {
                fixups.append(fixup(entity, relationship, pairs, resolver: resolver))
            }
        }
    }

    /// `UPDATE t SET column = v.value FROM unnest(values, keys...) AS v WHERE key = v.key`.
    private func fixup(_ entity: Entity, _ relationship: Relationship, _ pairs: [(ref: String, target: String)],
                       resolver: Resolver) -> Write {
        var sql = SQLText()
        let value = sql.bind(SQL.arrayLiteral(pairs.map { resolver.referenced(by: relationship, target: $0.target) }))
        let keys = entity.key.enumerated().map { index, attribute in
            sql.bind(SQL.arrayLiteral(pairs.map { resolver.key(of: $0.ref, entity: entity)?.values[index] })) + "::\(attribute.sqlType)[]"
        }
        let names = (0..<entity.key.count).map { "k\($0)" }
        sql.text = "UPDATE \(model.table(entity)) AS u SET \(SQL.identifier(relationship.column)) = v.value FROM unnest("
            + "\(value)::\(relationship.columnType)[], \(keys.joined(separator: ", "))) AS v(value, \(names.joined(separator: ", "))) WHERE "
            + zip(entity.key, names).map { "u.\(SQL.identifier($0.name)) = v.\($1)" }.joined(separator: " AND ")
        return Write(statement: sql.statement, changes: pairs.map { .insert($0.ref) }, records: pairs.map { "#" + $0.ref }, entity: entity.name)
    }

    // MARK: - Updates

    /// One UPDATE per record, of the fields that change: fields set back to what was read need
    /// no write, nor do the ones the database wins.
    private mutating func planUpdates(_ changes: ChangeSet, resolver: inout Resolver, skip: Set<ChangeID>,
                                      dropped: [RecordKey: Set<String>]) {
        for key in changes.updateOrder where !skip.contains(.update(key)) {
            guard let update = changes.updates[key], let entity = model.entity(exactly: update.entity) else { continue }
            let skipped = dropped[key] ?? []
            let columns = update.order.filter { column in
                guard !skipped.contains(column), let value = update.fields[column] else { return false }
                if case .text(let text) = value, let old = update.baseline[column], old == text { return false }
                if value == .null, let old = update.baseline[column], old == nil { return false }
                return true
            }
            guard !columns.isEmpty else { continue }
            var sql = SQLText()
            let sets = columns.map { column in
                "\(SQL.identifier(column)) = \(sql.bind(resolver.bind(update.fields[column]!, column: column, entity: entity, for: .update(key))))"
            }
            let condition = entity.keyEquals(key, alias: nil, into: &sql)
            sql.text = "UPDATE \(model.table(entity)) SET \(sets.joined(separator: ", ")) WHERE \(condition)"
            updates.append(Write(statement: sql.statement, changes: [.update(key)], records: ["\(entity.name) \(entity.show(key))"], entity: entity.name))
        }
    }

    /// `UPDATE entity WHERE predicate SET ...`, in the order typed.
    private mutating func planBulkUpdates(_ changes: ChangeSet, resolver: inout Resolver, skip: Set<ChangeID>, locking: Bool) {
        for (index, change) in changes.bulk.enumerated() where !skip.contains(.bulk(index)) {
            guard case .update(let fields) = change.kind, let entity = model.entity(exactly: change.entity) else { continue }
            do {
                var sql = SQLText()
                let matching = try QueryBuilder.keys(of: entity, matching: change.predicate, model: model, into: &sql, locking: locking)
                let sets = fields.map { field in
                    "\(SQL.identifier(field.column)) = \(sql.bind(resolver.bind(field.value, column: field.column, entity: entity, for: .bulk(index))))"
                }
                sql.text = "UPDATE \(model.table(entity)) SET \(sets.joined(separator: ", ")) WHERE (\(entity.keyList(alias: nil))) IN (\(matching))"
                bulkUpdates.append(Write(statement: sql.statement, changes: [.bulk(index)], records: [change.text], entity: entity.name))
            } catch {
                problems.append(Problem(change: .bulk(index), message: "\(change.text): \(error.message)"))
            }
        }
    }

    /// Integer keys the client gave for a column with a sequence move the sequence past them:
    /// without it, the next record given an id by the sequence would collide.
    private mutating func planSequenceBumps(_ changes: ChangeSet, skip: Set<ChangeID>) {
        var highest: [String: Int64] = [:]
        var order: [String] = []
        // Per entity, once: its integer key columns drawn from a sequence (most have one, or none).
        var drawnOf = RunMemo<[(column: String, sequence: String)]>()
        for row in changes.inserts where skip.isEmpty || !skip.contains(.insert(row.ref)) {
            let drawn = drawnOf.value(row.entity) { name in
                model.entity(exactly: name)?.key.compactMap { attribute in
                    guard let sequence = attribute.drawsFrom, case .integer = attribute.kind else { return nil }
                    return (attribute.name, sequence)
                } ?? []
            }
            for (column, sequence) in drawn {
                guard case .text(let given)? = row.value(of: column), let value = Int64(given) else { continue }
                if highest[sequence] == nil { order.append(sequence) }
                highest[sequence] = max(highest[sequence] ?? value, value)
            }
        }
        for sequence in order {
            sequenceBumps.append(Statement(
                "SELECT setval($1::regclass, $2::bigint) WHERE $2::bigint > coalesce(pg_sequence_last_value($1::regclass), 0)",
                [sequence, String(highest[sequence]!)]))
        }
    }
}

// MARK: - Resolving values

extension WritePlan {
    /// Turns field values into bind text: a `#ref` becomes the value its pending record has for
    /// the referenced column (its key, as given or assigned).
    struct Resolver {
        let model: Model
        let changes: ChangeSet
        let keys: PendingKeys
        var problems: [Problem] = []
        var lastReference: (entity: String, column: String, target: String, value: String)?

        /// The full key of a pending insert, nil while a column is unknown.
        func key(of ref: String, entity: Entity) -> RecordKey? {
            changes.place(of: ref).flatMap { key(at: $0, entity: entity) }
        }

        /// The full key of the pending insert at `place` in the unit.
        func key(at place: Int, entity: Entity) -> RecordKey? {
            guard let known = keys[place]?.values else { return nil }
            var values: [String] = []
            values.reserveCapacity(entity.key.count)
            for column in entity.keyColumns {
                if let assigned = known[column] {
                    values.append(assigned)
                } else {
                    return nil
                }
            }
            return RecordKey(entity: entity.name, values: values)
        }

        /// The value `relationship`'s column takes to point at the pending record `target`.
        func referenced(by relationship: Relationship, target: String) -> String? {
            guard let place = changes.place(of: target) else { return nil }
            if let assigned = keys[place]?.values[relationship.referencedColumn] { return assigned }
            if case .text(let text)? = changes.inserts[place].value(of: relationship.referencedColumn) { return text }
            return nil
        }

        mutating func bind(_ value: FieldValue, column: String, entity: Entity, for change: ChangeID) -> String? {
            switch value {
            case .null: return nil
            case .text(let text): return text
            case .ref(let target):
                // Many rows point at one record (employees at their department): the last answer.
                if let last = lastReference, last.target == target, last.column == column, last.entity == entity.name { return last.value }
                guard let relationship = entity.relationship(column: column) else { return nil }
                guard let resolved = referenced(by: relationship, target: target) else {
                    problems.append(Problem(change: change, message:
                        "#\(target) has no \(relationship.referencedColumn) yet for \(entity.name).\(relationship.name) to point at: give it one"))
                    return nil
                }
                lastReference = (entity.name, column, target, resolved)
                return resolved
            }
        }
    }
}

private func isRef(_ value: FieldValue?) -> Bool {
    if case .ref? = value { return true }
    return false
}

/// The inserts of a unit laid out in statements: grouped by entity (every row with the same
/// columns, see `KeyAllocation.columns`), groups ordered so that a record's statement comes
/// after the statements of the records it points at where such an order exists, records
/// within a group ordered the same way, and groups cut into statements of at most
/// `rowsPerStatement` rows.
struct InsertLayout {
    struct Statement {
        var entity: Entity
        var columns: [String]
        var rows: [PendingInsert]
        /// Where each row is in the unit (`ChangeSet.inserts`): its key is found by place.
        var places: [Int]
    }

    var statements: [Statement] = []
    /// References to records written by a later statement, written as nil and set after all
    /// inserts (the key may be nil), by `#ref`.
    var nulled: [String: [(column: String, target: String)]] = [:]
    /// Foreign keys whose check must wait for COMMIT (`SET CONSTRAINTS ... DEFERRED`).
    var deferredConstraints: [String] = []
    /// References that can be written neither in order, nor as nil first, nor deferred.
    var problems: [Problem] = []

    /// The inserts of `changes` but those `skip` leaves out.
    init(model: Model, changes: ChangeSet, skip: Set<ChangeID> = [], rowsPerStatement: Int) {
        let (groups, groupOf) = Self.groups(model: model, changes: changes, skip: skip)
        // By place in the unit, the group a written row is in (-1: left out); a reference's
        // target is found through the unit's index, once a run of rows pointing at it.
        func writtenGroup(of target: String) -> Int? {
            guard let place = changes.place(of: target), groupOf[place] >= 0 else { return nil }
            return groupOf[place]
        }
        let order = Self.order(groups, writtenGroup: writtenGroup(of:))
        let (statementOf, relationshipsOf) = cut(groups, in: order, rowsPerStatement: rowsPerStatement, places: changes.inserts.count,
                                                 writtenGroup: writtenGroup(of:))
        settleLaterReferences(changes: changes, statementOf: statementOf, relationshipsOf: relationshipsOf)
    }

    /// One entity's rows to insert.
    private struct Group {
        var entity: Entity
        var columns: [String]
        var rows: [PendingInsert]
        var places: [Int]
        /// To-one relationships by column, and those checked at once (not DEFERRABLE).
        var relationships: [String: Relationship]
        var immediate: [String: Relationship]
    }

    /// The rows to write grouped by entity, groups in the order their first rows come, with
    /// their columns; and by place in the unit, the group of each row (-1: left out).
    private static func groups(model: Model, changes: ChangeSet, skip: Set<ChangeID>) -> ([Group], [Int]) {
        var groups: [Group] = []
        var groupIndex: [String: Int] = [:]
        var groupOf = [Int](repeating: -1, count: changes.inserts.count)
        var last: (entity: String, index: Int)?  // rows of one entity come in runs
        for (place, row) in changes.inserts.enumerated() where skip.isEmpty || !skip.contains(.insert(row.ref)) {
            let index: Int
            if let last, last.entity == row.entity {
                index = last.index
            } else if let known = groupIndex[row.entity] {
                index = known
            } else {
                guard let entity = model.entity(exactly: row.entity) else { continue }
                if let known = groupIndex[entity.name] {
                    groupIndex[row.entity] = known
                    groupOf[place] = known
                    groups[known].rows.append(row)
                    groups[known].places.append(place)
                    continue
                }
                index = groups.count
                groupIndex[entity.name] = index
                groupIndex[row.entity] = index
                groups.append(Group(entity: entity, columns: [], rows: [], places: [], relationships: entity.toOneByColumn,
                                    immediate: entity.immediateToOneByColumn))
            }
            groupOf[place] = index
            last = (row.entity, index)
            groups[index].rows.append(row)
            groups[index].places.append(place)
        }
        for index in groups.indices { groups[index].columns = KeyAllocation.columns(of: groups[index].entity, rows: groups[index].rows) }
        return (groups, groupOf)
    }

    /// The pending records `row` points at through the keys in `immediate`, by `#ref`.
    private static func pointsAt(_ row: PendingInsert, through immediate: [String: Relationship]) -> [String] {
        var targets: [String] = []
        for field in row.fields {
            if case .ref(let target) = field.value, immediate.index(forKey: field.column) != nil { targets.append(target) }
        }
        return targets
    }

    /// The groups in the order they are written: each after the groups of the records its
    /// records point at through keys checked at once (a DEFERRABLE key is checked at COMMIT),
    /// by Kahn's algorithm; where records point at each other, the first group left goes next.
    private static func order(_ groups: [Group], writtenGroup: (String) -> Int?) -> [Int] {
        var after: [Set<Int>] = Array(repeating: [], count: groups.count)
        for (index, group) in groups.enumerated() {
            var groupOfTarget = RunMemo<Int?>(keeps: false)
            for row in group.rows {
                for field in row.fields {
                    guard case .ref(let target) = field.value, group.immediate.index(forKey: field.column) != nil else { continue }
                    if let other = groupOfTarget.value(target, writtenGroup), other != index { after[index].insert(other) }
                }
            }
            // A row may also point at a pending record by its values (a composite foreign key,
            // a key the client gave): the referenced entity's groups go first where they can.
            for key in group.entity.foreignKeys where !key.isDeferrable && key.target != group.entity.name {
                for (other, candidate) in groups.enumerated() where candidate.entity.name == key.target { after[index].insert(other) }
            }
        }
        var placed: [Bool] = Array(repeating: false, count: groups.count)
        var order: [Int] = []
        while order.count < groups.count {
            let next = groups.indices.first { !placed[$0] && after[$0].allSatisfy { placed[$0] } }
                ?? groups.indices.first { !placed[$0] }!
            placed[next] = true
            order.append(next)
        }
        return order
    }

    /// The groups, in `order`, cut into statements of at most `rowsPerStatement` rows, rows of
    /// a tree of one table parents first. Returns by place the statement each written row is
    /// in, and each statement's to-one relationships by column.
    private mutating func cut(_ groups: [Group], in order: [Int], rowsPerStatement: Int, places: Int,
                              writtenGroup: (String) -> Int?) -> ([Int], [[String: Relationship]]) {
        var statementOf = [Int](repeating: -1, count: places)
        var relationshipsOf: [[String: Relationship]] = []
        for index in order {
            var group = groups[index]
            let immediate = group.immediate
            // Only rows that point at their own group need ordering (a tree of one table).
            if immediate.values.contains(where: { $0.target == group.entity.name }) {
                let order = Self.parentsFirst(group.rows) { Self.pointsAt($0, through: immediate).filter { writtenGroup($0) == index } }
                group.rows = order.map { group.rows[$0] }
                group.places = order.map { group.places[$0] }
            }
            var start = 0
            while start < group.rows.count {
                let end = min(start + rowsPerStatement, group.rows.count)
                for place in group.places[start..<end] { statementOf[place] = statements.count }
                statements.append(Statement(entity: group.entity, columns: group.columns, rows: Array(group.rows[start..<end]),
                                            places: Array(group.places[start..<end])))
                relationshipsOf.append(group.relationships)
                start = end
            }
        }
        return (statementOf, relationshipsOf)
    }

    /// A reference to a record written by a later statement: deferred through a DEFERRABLE
    /// key, else written as nil and set afterwards, else impossible.
    private mutating func settleLaterReferences(changes: ChangeSet, statementOf: [Int], relationshipsOf: [[String: Relationship]]) {
        var deferred: Set<String> = []
        for (index, statement) in statements.enumerated() {
            let entity = statement.entity
            let relationships = relationshipsOf[index]
            var statementOfTarget = RunMemo<Int?>(keeps: false)
            for row in statement.rows {
                for (column, value) in row.fields {
                    guard case .ref(let target) = value,
                          let targetIndex = statementOfTarget.value(target, { changes.place(of: $0).map { statementOf[$0] } }),
                          targetIndex > index, let relationship = relationships[column] else { continue }
                    if relationship.isDeferrable {
                        deferred.insert(relationship.constraint)
                    } else if !relationship.isRequired && !entity.key.contains(where: { $0.name == column }) {
                        nulled[row.ref, default: []].append((column, target))
                    } else {
                        problems.append(Problem(change: .insert(row.ref), message:
                            "#\(row.ref) \(entity.name): its \(relationship.name) #\(target) cannot be written before it (records that point at each other need a key that may be nil, or a DEFERRABLE one)"))
                    }
                }
            }
        }
        deferredConstraints = deferred.sorted()
    }

    /// `names` ordered so that every entity comes after the entities it points at (Kahn's
    /// algorithm); self-references are ignored; entities in a cycle keep their order, after the rest.
    static func entityOrder(model: Model, names: [String]) -> [String] {
        let members = Set(names)
        var remaining = names
        var placed: Set<String> = []
        var order: [String] = []
        while !remaining.isEmpty {
            guard let next = remaining.firstIndex(where: { name in
                (model.entity(exactly: name)?.foreignKeys.map(\.target) ?? []).allSatisfy {
                    $0 == name || placed.contains($0) || !members.contains($0)
                }
            }) else {
                order.append(contentsOf: remaining)
                break
            }
            let name = remaining.remove(at: next)
            placed.insert(name)
            order.append(name)
        }
        return order
    }

    /// The rows' order (their indices) so that a row comes after the rows (of the same group) it
    /// points at, where such an order exists (Kahn's algorithm, linear); in a cycle, the first
    /// row left goes next.
    static func parentsFirst(_ rows: [PendingInsert], pointsAt: (PendingInsert) -> [String]) -> [Int] {
        var index: [String: Int] = [:]
        for (position, row) in rows.enumerated() { index[row.ref] = position }
        var waiting = Array(repeating: 0, count: rows.count)
        var children: [[Int]] = Array(repeating: [], count: rows.count)
        for (position, row) in rows.enumerated() {
            let parents = pointsAt(row)
            for parent in parents.count < 2 ? parents : Array(Set(parents)) {
                guard let parentIndex = index[parent], parentIndex != position else { continue }
                waiting[position] += 1
                children[parentIndex].append(position)
            }
        }
        guard waiting.contains(where: { $0 > 0 }) else { return Array(rows.indices) }
        var placed = Array(repeating: false, count: rows.count)
        var ready = rows.indices.filter { waiting[$0] == 0 }
        var head = 0
        var scan = 0
        var result: [Int] = []
        result.reserveCapacity(rows.count)
        while result.count < rows.count {
            let next: Int
            if head < ready.count {
                next = ready[head]
                head += 1
                if placed[next] { continue }
            } else {
                while placed[scan] { scan += 1 }
                next = scan
            }
            placed[next] = true
            result.append(next)
            for child in children[next] {
                waiting[child] -= 1
                if waiting[child] == 0 && !placed[child] { ready.append(child) }
            }
        }
        return result
    }
}
