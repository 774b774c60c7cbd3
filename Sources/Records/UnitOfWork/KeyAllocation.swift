/// Keys for pending inserts, known before any of them is written: given by the client, taken
/// through a `#ref` from the record a key column points at (a join table's key), assigned
/// earlier, or allocated now from each key column's sequence or default. With every key known
/// up front, references resolve without a round trip per row, rows go in multi-row statements,
/// and a pending insert keeps the id it was first shown. Pure.
enum KeyAllocation {
    /// Every key value known without PostgreSQL, by the insert's place in the unit.
    static func known(_ changes: ChangeSet, model: Model, assigned: [String: AssignedKey]) -> PendingKeys {
        var throughRefs = false
        return known(changes, model: model, assigned: assigned, throughRefs: &throughRefs)
    }

    /// `throughRefs`: some row's key is taken from another's (a join table's), so a key given
    /// to one row later may change another's.
    static func known(_ changes: ChangeSet, model: Model, assigned: [String: AssignedKey], throughRefs: inout Bool) -> PendingKeys {
        var known = PendingKeys(changes)
        // Per entity, once: the columns known up front and the relationships among them.
        var shapes = RunMemo<KeyShape?>()
        func shape(_ name: String) -> KeyShape? {
            shapes.value(name) { name in
                model.entity(exactly: name).map { entity in
                    KeyShape(name: entity.name, columns: entity.knownKeyColumns, relationships: entity.knownKeyRelationships)
                }
            }
        }
        // Rows resolved ahead of their turn (the records a key is taken from).
        var resolvedAhead = false
        var visiting: Set<Int> = []
        // A key taken from the record it points at (a join table's) is that record's, worked
        // out first. Depth first with a stack of its own, not by recursion: a chain of such
        // keys is as long as the client makes it (a table whose key points at its own), and
        // recursion that deep ended the server. A cycle of such keys is left unknown.
        var frames: [KeyFrame] = []
        /// Works out `place`'s key at once (none of its key columns points anywhere: most
        /// entities), or pushes a frame for it; a row done already is left as it is.
        func begin(_ place: Int) {
            if resolvedAhead, known[place] != nil { return }
            let insert = changes.inserts[place]
            guard let entity = shape(insert.entity) else { return }
            let previous = assigned.isEmpty ? nil : assigned[insert.ref]
            guard entity.relationships.isEmpty else {
                return frames.append(KeyFrame(place: place, shape: entity, previous: previous))
            }
            var values = ColumnValues()
            for column in entity.columns {
                let field = insert.value(of: column)
                if case .ref? = field { throughRefs = true }
                if let value = Self.own(field, column, previous: previous, entity: entity.name) { values[column] = value }
            }
            known[place] = AssignedKey(entity: entity.name, values: values)
        }
        for root in changes.inserts.indices {
            begin(root)
            while var frame = frames.popLast() {
                let insert = changes.inserts[frame.place]
                if let waiting = frame.waiting {
                    // The record it waited for is done (or left unknown): its key is known's.
                    visiting.remove(frame.place)
                    if let value = known[waiting.pointed]?.values[waiting.relationship.referencedColumn] {
                        frame.values[waiting.column] = value
                    } else if case .text(let text)? = changes.inserts[waiting.pointed].value(of: waiting.relationship.referencedColumn) {
                        frame.values[waiting.column] = text
                    }
                    frame.waiting = nil
                    frame.next += 1
                }
                while frame.waiting == nil && frame.next < frame.shape.columns.count {
                    let column = frame.shape.columns[frame.next]
                    let field = insert.value(of: column)
                    if case .ref(let target)? = field {
                        throughRefs = true
                        if let relationship = frame.shape.relationships[column], let pointed = changes.place(of: target),
                           visiting.insert(frame.place).inserted {
                            resolvedAhead = true
                            frame.waiting = (column, relationship, pointed)
                            continue
                        }
                    }
                    if let value = Self.own(field, column, previous: frame.previous, entity: frame.shape.name) { frame.values[column] = value }
                    frame.next += 1
                }
                if let waiting = frame.waiting {
                    frames.append(frame)
                    begin(waiting.pointed)
                    continue
                }
                known[frame.place] = AssignedKey(entity: frame.shape.name, values: frame.values)
            }
        }
        return known
    }

    /// A key column's value a row gives by itself: its field's text, or what a read gave it
    /// before; nil for a reference (its target's value) or nothing known.
    private static func own(_ field: FieldValue?, _ column: String, previous: AssignedKey?, entity: String) -> String? {
        switch field {
        case .text(let text)?: text
        case .ref?: nil
        default: previous?.entity == entity ? previous?.values[column] : nil
        }
    }

    /// What an entity's key is made of, for `known`.
    private struct KeyShape {
        var name: String
        var columns: [String]
        var relationships: [String: Relationship]
    }

    /// A row whose key `known` is working out: the next column to read, and the record whose
    /// key it waits for.
    private struct KeyFrame {
        var place: Int
        var shape: KeyShape
        var previous: AssignedKey?
        var values = ColumnValues()
        var next = 0
        var waiting: (column: String, relationship: Relationship, pointed: Int)?

        init(place: Int, shape: KeyShape, previous: AssignedKey?) {
            self.place = place
            self.shape = shape
            self.previous = previous
        }
    }

    /// One statement per entity and set of missing columns, filling `refs` (and their
    /// `places` in the unit) in order.
    struct Request: Sendable {
        var entity: String
        var columns: [String]
        var refs: [String]
        /// How each column gets its value: its sequence, or its default evaluated.
        var allocations: [Attribute.Allocation] = []
        /// Where each of `refs` is in the unit (empty for a request made by hand).
        var places: [Int] = []

        /// Each column's sequence, nil for one whose value another default gives.
        var sequences: [String?] {
            allocations.map { if case .sequence(let sequence) = $0 { sequence } else { nil } }
        }

        /// What asks PostgreSQL for the values, a row for each of `refs`: made only when
        /// round 1 sends it (a key reserve gives most saves their keys before).
        var statement: Statement {
            var sql = SQLText()
            let count = sql.bind(String(refs.count))
            let values = allocations.map { allocation -> String in
                switch allocation {
                case .sequence(let sequence): return "nextval(\(sql.bind(sequence))::regclass)::text"
                // The column's default, as the catalog prints it: evaluated once a row.
                case .expression(let expression): return "(\(expression))::text"
                }
            }
            sql.text = "SELECT \(values.joined(separator: ", ")) FROM generate_series(1, \(count)::int)"
            return sql.statement
        }
    }

    /// Whether the members of `columns` that `test` picks are `expected`, in order.
    private static func only(_ columns: [String], where test: (String) -> Bool, are expected: [String]) -> Bool {
        var next = 0
        for column in columns where test(column) {
            guard next < expected.count, expected[next] == column else { return false }
            next += 1
        }
        return next == expected.count
    }

    /// The statements that allocate the key values still missing (those a column's sequence or
    /// default can give; a column with neither is the client's to give, which validation says).
    static func requests(_ changes: ChangeSet, model: Model, known: PendingKeys,
                         skip: Set<ChangeID> = []) -> [Request] {
        var byShape: [String: Int] = [:]
        var requests: [Request] = []
        // Per entity, once; an entity the model no longer has allocates nothing (validation says why).
        var allocatedOf = RunMemo<(name: String, columns: [String])>()
        // Rows of one entity, missing the same columns, come in runs: the last one's request is
        // tried first (the shape is not built and hashed again).
        var last: (entity: String, missing: [String], index: Int)?
        for (place, insert) in changes.inserts.enumerated() where skip.isEmpty || !skip.contains(.insert(insert.ref)) {
            let entity = allocatedOf.value(insert.entity) { name in
                model.entity(exactly: name).map { ($0.name, $0.allocatedColumns.map(\.name)) } ?? ("", [])
            }
            guard !entity.columns.isEmpty else { continue }
            let values = known[place]?.values
            func isMissing(_ column: String) -> Bool { values?[column] == nil && insert.value(of: column) == nil }
            // Checked against the last row's in place: no array made for a row of a run.
            if let last, last.entity == insert.entity, Self.only(entity.columns, where: isMissing, are: last.missing) {
                requests[last.index].refs.append(insert.ref)
                requests[last.index].places.append(place)
                continue
            }
            let missing = entity.columns.filter(isMissing)
            guard !missing.isEmpty else { continue }
            let shape = entity.name + "\u{0}" + missing.joined(separator: "\u{0}")
            let index = byShape[shape] ?? requests.count
            if index == requests.count {
                byShape[shape] = index
                requests.append(Request(entity: entity.name, columns: missing, refs: []))
            }
            requests[index].refs.append(insert.ref)
            requests[index].places.append(place)
            last = (insert.entity, missing, index)
        }
        for index in requests.indices {
            let entity = model.entity(exactly: requests[index].entity)!
            requests[index].allocations = requests[index].columns.map { column in entity.allocatedColumns.first(where: { $0.name == column })!.allocation! }
        }
        return requests
    }

    /// The columns an entity's pending inserts are written with: every one any of them sets,
    /// with the key's and the ones given values before SAVE, in the table's order. One set per
    /// entity puts all its rows in the same statements, so records of one table that point at
    /// each other are written together, whatever each one typed.
    static func columns(of entity: Entity, rows: [PendingInsert]) -> [String] {
        var set = entity.allocatedNames
        var previous: [String]?
        for row in rows {
            // Rows typed alike (the common case) are counted once.
            if let previous, row.sets(exactly: previous) { continue }
            for field in row.fields { set.insert(field.column) }
            previous = row.fields.map(\.column)
        }
        let key = entity.keyColumns
        return key + entity.columnNames.filter { set.contains($0) && !key.contains($0) }
    }

    /// For the columns a pending insert leaves out that others of its entity set: the column's
    /// default, evaluated now (as the INSERT would have, in the same transaction). A column
    /// without one is nil. Not kept by the unit: a read evaluates them afresh.
    static func fills(_ changes: ChangeSet, model: Model, known: PendingKeys, skip: Set<ChangeID> = []) -> [Request] {
        // Per entity, once: the columns whose default a row may be left to. A unit whose
        // entities have none (the common case) is not grouped at all.
        var defaultedOf = RunMemo<(entity: Entity, columns: Set<String>)?>()
        func defaulted(_ name: String) -> (entity: Entity, columns: Set<String>)? {
            defaultedOf.value(name) { name in
                model.entity(exactly: name).flatMap { entity in entity.defaultedNames.isEmpty ? nil : (entity, entity.defaultedNames) }
            }
        }
        var rows: [PendingInsert] = []
        var setsDefaulted = false
        for insert in changes.inserts where skip.isEmpty || !skip.contains(.insert(insert.ref)) {
            guard let (_, columns) = defaulted(insert.entity) else { continue }
            rows.append(insert)
            // A fill is for a row that leaves out what another row sets: none sets one, none.
            if !setsDefaulted { setsDefaulted = insert.fields.contains { columns.contains($0.column) } }
        }
        guard setsDefaulted else { return [] }
        var byShape: [String: Int] = [:]
        var requests: [Request] = []
        for (name, members) in Dictionary(grouping: rows, by: \.entity) {
            guard let (entity, defaults) = defaulted(name) else { continue }
            // The columns some rows set and others may leave to a default evaluated now.
            let columns = Self.columns(of: entity, rows: members).filter { defaults.contains($0) }
            guard !columns.isEmpty else { continue }
            for row in members {
                let values = known[row.ref]?.values
                let missing = columns.filter { column in row.value(of: column) == nil && values?[column] == nil }
                guard !missing.isEmpty else { continue }
                let shape = name + "\u{0}" + missing.joined(separator: "\u{0}")
                if let index = byShape[shape] {
                    requests[index].refs.append(row.ref)
                } else {
                    byShape[shape] = requests.count
                    requests.append(Request(entity: name, columns: missing, refs: [row.ref]))
                }
            }
        }
        for index in requests.indices {
            let entity = model.entity(exactly: requests[index].entity)!
            requests[index].allocations = requests[index].columns.map { .expression(entity.attribute(named: $0)!.defaultValue!) }
        }
        return requests
    }

    /// The sequences `requests` draw from, in order, with how many values each needs; nil when
    /// some column's value comes from another default, which the save's transaction evaluates.
    static func sequenceNeeds(_ requests: [Request]) -> [(sequence: String, count: Int)]? {
        var order: [String] = []
        var counts: [String: Int] = [:]
        for request in requests {
            for sequence in request.sequences {
                guard let sequence else { return nil }
                if counts[sequence] == nil { order.append(sequence) }
                counts[sequence, default: 0] += request.refs.count
            }
        }
        return order.map { ($0, counts[$0]!) }
    }

    /// The keys `requests` allocate, drawn from `values` (by sequence, in the order
    /// `sequenceNeeds` counted them), by `#ref`.
    static func drawn(_ requests: [Request], values: [String: [String]]) -> [String: AssignedKey] {
        var keys: [String: AssignedKey] = Dictionary(minimumCapacity: requests.reduce(0) { $0 + $1.refs.count })
        draw(requests, values: values) { request, offset, key in keys[request.refs[offset]] = key }
        return keys
    }

    /// The same, each with its place in the unit (the requests' `places`).
    static func drawnByPlace(_ requests: [Request], values: [String: [String]]) -> [(place: Int, ref: String, key: AssignedKey)] {
        var keys: [(place: Int, ref: String, key: AssignedKey)] = []
        keys.reserveCapacity(requests.reduce(0) { $0 + $1.refs.count })
        draw(requests, values: values) { request, offset, key in keys.append((request.places[offset], request.refs[offset], key)) }
        return keys
    }

    private static func draw(_ requests: [Request], values: [String: [String]], into take: (Request, Int, AssignedKey) -> Void) {
        var next: [String: Int] = [:]
        for request in requests {
            // Each column's pool and where its values are, looked up once a request, not once
            // a row: a row draws the next value of each sequence in turn, so a column sharing
            // its sequence with others of the row takes every `stride`-th value from `phase`.
            // Kept in arrays of their own: the row loop reads them without copying an entry.
            var names: [String] = [], sequences: [String] = [], pools: [[String]] = [], starts: [Int] = [], phases: [Int] = []
            for (column, sequence) in zip(request.columns, request.sequences) {
                guard let sequence, let pool = values[sequence] else { continue }
                phases.append(sequences.filter { $0 == sequence }.count)
                names.append(column)
                sequences.append(sequence)
                pools.append(pool)
                starts.append(next[sequence, default: 0])
            }
            let strides = sequences.map { sequence in sequences.filter { $0 == sequence }.count }
            for offset in request.refs.indices {
                var drawn = ColumnValues()
                for index in names.indices {
                    let at = starts[index] + offset * strides[index] + phases[index]
                    if at < pools[index].count { drawn[names[index]] = pools[index][at] }
                }
                take(request, offset, AssignedKey(entity: request.entity, values: drawn))
            }
            for index in names.indices where phases[index] == 0 {
                next[sequences[index]] = min(pools[index].count, starts[index] + request.refs.count * strides[index])
            }
        }
    }

    /// The values the requests' results hold, by `#ref`.
    static func allocated(_ requests: [Request], results: [StatementResult]) -> [String: AssignedKey] {
        var keys: [String: AssignedKey] = [:]
        for (request, result) in zip(requests, results) {
            for (row, ref) in request.refs.enumerated() where row < result.rows.count {
                var values = ColumnValues()
                for (column, name) in request.columns.enumerated() {
                    if let value = result.rows[row][column] { values[name] = value }
                }
                keys[ref] = AssignedKey(entity: request.entity, values: values)
            }
        }
        return keys
    }

    private static func isRef(_ value: FieldValue?) -> Bool {
        if case .ref? = value { return true }
        return false
    }
}
