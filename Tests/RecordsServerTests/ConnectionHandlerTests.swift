import Testing
import Records
@testable import RecordsServer

/// A connection's handler driven through its states with an in-memory transport and a host
/// that records what it is asked: no socket, no loop, no PostgreSQL.
@Suite struct ConnectionHandlerTests {
    /// Bytes in, bytes out; `accepts` bounds what one write takes (nil: all of it).
    final class MemoryTransport: Transport {
        let fd: Int32 = -1
        var input: [UInt8] = []
        var peerClosed = false
        var written: [UInt8] = []
        var accepts: Int?
        var closed = false

        func read(into buffer: UnsafeMutableRawBufferPointer) -> TransportRead {
            guard !input.isEmpty else { return peerClosed ? .closed : .wouldBlock }
            let count = min(buffer.count, input.count)
            buffer.copyBytes(from: input[0..<count])
            input.removeFirst(count)
            return .bytes(count)
        }

        func write(_ bytes: UnsafeRawBufferPointer) -> TransportWrite {
            let count = min(bytes.count, accepts ?? bytes.count)
            guard count > 0 else { return .wouldBlock }
            written += bytes[0..<count]
            if accepts != nil { accepts! -= count }
            return .wrote(count)
        }

        var wantsRead: Bool { false }
        var wantsWrite: Bool { false }
        var hasBufferedInput: Bool { false }
        func close() { closed = true }
        func finishWriting() {}

        /// What the client has been sent so far, as text, taken.
        func take() -> String {
            defer { written = [] }
            return String(decoding: written, as: UTF8.self)
        }
    }

    final class RecordingHost: ConnectionHost {
        var stopping = false
        let metrics = Metrics()
        var clock: UInt64 = 1
        var readBuffer = [UInt8](repeating: 0, count: 4096)
        var turns: [() -> Void] = []
        var interest: UInt32?
        var submitted: [[BatchItem]] = []
        var cancels: [(Int, String)] = []
        var persists = 0
        var farewells = 0
        var closedGracefully: Bool?
        var warnings: [String] = []

        func now() -> UInt64 { clock += 1; return clock }
        func warnOnce(_ message: String) { warnings.append(message) }
        func read(_ transport: Transport, into framer: inout LineFramer) -> TransportRead {
            let result = readBuffer.withUnsafeMutableBytes { transport.read(into: $0) }
            if case .bytes(let count) = result { framer.append(readBuffer[0..<count]) }
            return result
        }
        func nextTurn(_ body: @escaping () -> Void) { turns.append(body) }
        func wait(_ connection: ClientConnection, for events: UInt32) { interest = events }
        /// What STARTTLS swaps in (nil: TLS could not be set up).
        var secure: Transport?
        var imports = 0
        func secureTransport(for connection: ClientConnection) -> Transport? { secure }
        func submit(_ connection: ClientConnection, _ works: [BatchItem]) {
            connection.machine.startedDatabase()
            submitted.append(works)
        }
        func startImport(_ state: ImportState, on connection: ClientConnection) { imports += 1 }
        func importFeed(for connection: ClientConnection) -> ImportFeed { ImportFeed(stallSeconds: 30) {} }
        func cancel(session target: Int, key: String, from connection: ClientConnection) { cancels.append((target, key)) }
        func persistIfChanged(_ connection: ClientConnection) { persists += 1 }
        func durableSessionEnded(_ token: String, quit: Bool) {}
        func farewell(_ connection: ClientConnection) {
            farewells += 1
            connection.machine.farewell()
        }
        func pushEvents(_ connection: ClientConnection) {}
        func startLedgers(for connection: ClientConnection) {}
        func publish(_ connection: ClientConnection) {}
        func closeConnection(_ connection: ClientConnection, graceful: Bool) {
            closedGracefully = graceful
            connection.machine.didClose()
        }

        /// Runs the turns the handler asked for, as the loop would, until none is left.
        func runTurns(limit: Int = 100) {
            var count = 0
            while !turns.isEmpty, count < limit {
                turns.removeFirst()()
                count += 1
            }
        }
    }

    static let secureContext: ServerContext = {
        var security = ServerContext.Security()
        security.tlsAvailable = true
        return ServerContext(model: context.model, databaseDescription: "test", security: security)
    }()

    static let context: ServerContext = {
        let id = Attribute(name: "id", sqlType: "bigint", kind: .integer(bits: 64), isNotNull: true, defaultValue: nil,
                           isUnique: true, isPrimaryKey: true, isGenerated: false, comment: nil)
        let name = Attribute(name: "name", sqlType: "text", kind: .string, isNotNull: false, defaultValue: nil,
                             isUnique: false, isPrimaryKey: false, isGenerated: false, comment: nil)
        let item = Entity(name: "item", key: [id], attributes: [id, name], relationships: [])
        return ServerContext(model: Model(schema: "public", entities: [item], unserved: []), databaseDescription: "test")
    }()

    let host = RecordingHost()
    let transport = MemoryTransport()

    func connection(durable: Bool = false, proxied: Bool = false, maxLineLength: Int = 1 << 20,
                    context: ServerContext = Self.context) -> ClientConnection {
        var configuration = Server.Configuration()
        configuration.durableUnits = durable
        return ClientConnection(id: 1, host: host, settings: ConnectionSettings(configuration), transport: transport,
                                session: Session(id: 1, context: context), peer: "127.0.0.1",
                                maxLineLength: maxLineLength, highWater: 64, awaitsProxyHeader: proxied, now: 0)
    }

    func send(_ text: String, to connection: ClientConnection) {
        transport.input += Array(text.utf8)
        connection.handle(events: Readiness.readable)
    }

    @Test func pipelinedCommandsAreAnsweredInOrderInOneTurn() {
        let connection = connection()
        send("PING\nPING\n", to: connection)
        #expect(transport.take() == "+OK PONG\n+OK PONG\n")
        #expect(host.interest == Readiness.readable)
        #expect(host.submitted.isEmpty)
    }

    @Test func pipelinedReadsGoToThePoolAsOneJobAndTheLineAfterThemWaitsForTheirReplies() {
        let connection = connection()
        send("GET item 1\nGET item 2\nPING\n", to: connection)
        #expect(host.submitted.count == 1)
        #expect(host.submitted[0].count == 2)
        #expect(connection.busy)
        #expect(transport.take() == "")
        connection.completed(bytes: Array("-ERR NOT_FOUND a\n-ERR NOT_FOUND b\n".utf8))
        #expect(transport.take() == "-ERR NOT_FOUND a\n-ERR NOT_FOUND b\n+OK PONG\n")
        #expect(!connection.busy)
    }

    @Test func aLineTooLongBeforeSignInSaysSo() {
        let connection = connection(maxLineLength: 16)
        send(String(repeating: "x", count: 40) + "\nPING\n", to: connection)
        #expect(transport.take() == "-ERR LIMIT line too long (40+ bytes; the limit is 16 before sign-in)\n+OK PONG\n")
    }

    @Test func aClientThatReadsNothingIsNotReadUntilItsOutputDrains() {
        let connection = connection()
        transport.accepts = 0
        send(String(repeating: "PING\n", count: 40), to: connection)
        // Past the high-water mark (64 bytes) no more lines are taken, and the socket is
        // waited on for room.
        #expect(connection.pendingOutput >= 64)
        #expect(connection.pendingOutput < 40 * 6)
        #expect(host.interest.map { $0 & Readiness.writable != 0 } == true)
        transport.accepts = nil
        connection.handle(events: Readiness.writable)
        host.runTurns()
        #expect(transport.take() == String(repeating: "+OK PONG\n", count: 40))
        #expect(host.interest == Readiness.readable)
    }

    @Test func aBalancersHeaderNamesTheClientAndAnythingElseEndsTheConnection() {
        let connection = connection(proxied: true)
        send("PROXY TCP4 10.1.2.3 127.0.0.1 50000 7878\nPING\n", to: connection)
        #expect(transport.take() == "+OK PONG\n")
        #expect(connection.session.peer == "10.1.2.3")

        let other = ConnectionHandlerTests()
        let refused = other.connection(proxied: true)
        other.send("PING\n", to: refused)
        #expect(other.transport.take().hasPrefix("-ERR SYNTAX expected a PROXY protocol v1 header from this balancer"))
        #expect(other.host.closedGracefully == true)
        #expect(other.host.warnings.count == 1)
    }

    @Test func quitIsAnsweredThenTheConnectionCloses() {
        let connection = connection()
        send("QUIT\nPING\n", to: connection)
        #expect(transport.take() == "+OK bye\n")
        #expect(host.closedGracefully == true)
    }

    @Test func aClientThatClosesIsAnsweredWhatItSentFirst() {
        let connection = connection()
        transport.peerClosed = true
        send("PING\n", to: connection)
        connection.handle(events: Readiness.readable | Readiness.hangup)  // the close, read next
        #expect(transport.take() == "+OK PONG\n")
        #expect(host.closedGracefully == true)
    }

    @Test func cancelAsksTheHostAndAnswersTheSameWhateverHappened() {
        let connection = connection()
        send("CANCEL s7 secret\n", to: connection)
        #expect(host.cancels.count == 1)
        #expect(host.cancels.first?.0 == 7)
        #expect(host.cancels.first?.1 == "secret")
        #expect(transport.take() == "+OK cancel request sent\n")
    }

    @Test func aStoppingServerHandsTheSessionOffOnceItsStepIsAnswered() {
        let connection = connection()
        send("GET item 1\n", to: connection)
        host.stopping = true
        connection.completed(bytes: Array("-ERR NOT_FOUND a\n".utf8))
        #expect(host.farewells == 1)
    }

    @Test func durableUnitsWriteTheStateEachTurnAndOthersNever() {
        let durable = connection(durable: true)
        send("PING\n", to: durable)
        #expect(host.persists > 0)

        let other = ConnectionHandlerTests()
        other.send("PING\n", to: other.connection())
        #expect(other.host.persists == 0)
    }

    @Test func startTLSSwapsTheTransportOnceItsReplyIsWrittenAndForgetsWhatCameBefore() {
        let connection = connection(context: Self.secureContext)
        let secure = MemoryTransport()
        host.secure = secure
        // A line sent in clear behind STARTTLS could have been injected: it is dropped.
        send("STARTTLS\nPING\n", to: connection)
        #expect(transport.take() == "+OK begin TLS\n")
        #expect(connection.transport === secure)
        #expect(connection.session.secure)
        secure.input = Array("PING\n".utf8)
        connection.handle(events: Readiness.readable)
        #expect(secure.take() == "+OK PONG\n")
    }

    @Test func aFailedTLSSetUpClosesTheConnection() {
        let connection = connection(context: Self.secureContext)
        send("STARTTLS\n", to: connection)
        #expect(transport.take() == "+OK begin TLS\n")
        #expect(host.closedGracefully == false)
    }

    @Test func anImportsLinesAreGatheredUpToItsDotAndItsCopyStartsThen() {
        let connection = connection()
        send("IMPORT item\nid,name\n1,a\n2,b\n", to: connection)
        #expect(transport.take() == "")
        #expect(connection.importing?.lines == 3)
        #expect(host.imports == 0)  // a chunk not full: no COPY while lines are typed
        send(".\nPING\n", to: connection)
        #expect(host.imports == 1)
        #expect(connection.importing == nil)
        #expect(connection.busy)  // until the COPY's reply; PING waits behind it
        connection.completed(bytes: Array("+OK imported 2 records\n".utf8))
        #expect(transport.take() == "+OK imported 2 records\n+OK PONG\n")
    }

    @Test func streamedLinesGoOutAsTheyComeAndTheStatusLineAfterThem() throws {
        let connection = connection()
        send("FIND item\n", to: connection)
        #expect(host.submitted.count == 1)
        // A batch past half the high-water mark (64 bytes here) goes out while the step runs.
        let batch = (1...4).map { "{\"id\":\($0)}\n" }.joined()
        connection.deliver(Array(batch.utf8), sink: StreamSink(inbox: try LoopInbox(), connection: 1, stallSeconds: 30, metrics: host.metrics))
        #expect(transport.take() == batch)
        #expect(connection.busy)
        connection.completed(bytes: Array("+OK 4 records\n".utf8))
        #expect(transport.take() == "+OK 4 records\n")
    }
}
