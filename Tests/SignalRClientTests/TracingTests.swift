import Foundation
import InMemoryTracing
import Instrumentation
import SignalRProtocol
import TestSupport
import Testing
import Tracing

@testable import SignalRClient

/// One in-memory tracer for this test process (a tracer is bootstrapped once per process).
let testTracer: InMemoryTracer = {
    let tracer = InMemoryTracer()
    InstrumentationSystem.bootstrap(tracer)
    return tracer
}()

/// Spans as the .NET client makes them, recorded by an in-memory tracer: an invocation's client span and the context
/// that travels in its headers (the simulator's `Headers` method returns what it received), a connection attempt with
/// its negotiate inside, a handler run as a consumer span.
@Suite(.serialized, .timeLimit(.minutes(1))) struct TracingTests {
    @Test func anInvocationIsAClientSpanWhoseContextTravelsInItsHeaders() async throws {
        let tracer = testTracer
        try await withSimulator { base in
            let connection = HubConnection(url: hubURL(base), options: options(), logger: quietLogger())
            try await connection.start()
            let received = try #require(try await connection.invoke("Headers"))
            await #expect(throws: HubConnectionError.self) { try await connection.invoke("Fail", [.string("no")]) }
            await connection.stop()

            // Other suites run beside this one with the same tracer: spans are found by what this test saw.
            let spans = tracer.finishedSpans
            let spanID = try #require(
                received[InMemoryTracer.spanIDKey]?.stringValue, "the server got a context: \(received)")
            let invoke = try #require(spans.first { $0.spanID == spanID })
            #expect(invoke.operationName == "family/Headers")
            #expect(invoke.kind == .client)
            #expect(received[InMemoryTracer.traceIDKey]?.stringValue == invoke.traceID)
            #expect(invoke.attributes["rpc.system"]?.toSpanAttribute() == "signalr")
            #expect(invoke.attributes["rpc.method"]?.toSpanAttribute() == "Headers")
            #expect(invoke.attributes["server.address"]?.toSpanAttribute() == "127.0.0.1")
            let failed = spans.filter { $0.operationName == "family/Fail" }
            #expect(!failed.isEmpty && failed.allSatisfy { $0.status?.code == .error && !$0.errors.isEmpty })

            let connects = spans.filter { $0.operationName == "family connect" }
            #expect(
                connects.contains { connect in
                    spans.contains {
                        $0.operationName == "family negotiate" && $0.parentSpanID == connect.spanID
                            && $0.traceID == connect.traceID
                    }
                }, "a negotiate inside its connection attempt")
            #expect(connects.contains { $0.attributes["signalr.transport"]?.toSpanAttribute() == "WebSockets" })
        }
    }

    @Test func aHandlerRunIsAConsumerSpan() async throws {
        let tracer = testTracer
        try await withSimulator { base in
            let connection = HubConnection(url: hubURL(base), options: options(), logger: quietLogger())
            let seen = Collector<Int>()
            await connection.on("BalanceUpdated") { _ in seen.append(1) }
            try await connection.start()
            try await call(base, "POST", "/_sim/burst?count=2")
            _ = await seen.wait(for: 2)
            await connection.stop()
            let handled = tracer.finishedSpans.filter {
                $0.operationName == "family/BalanceUpdated" && $0.kind == .consumer
            }
            #expect(handled.count >= 2)
        }
    }
}
