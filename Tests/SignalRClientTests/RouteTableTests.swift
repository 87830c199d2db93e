import Testing

@testable import SignalRClient

/// The connection's routes, found from a target's bytes as the server wrote them, without sockets.
@Suite struct RouteTableTests {
    func route(_ targets: [String]) -> Route<Int> {
        Route(
            decoder: HubEventDecoder(targets: targets, decode: { _, _ in 1 }, onError: { _, _ in }),
            buffer: HubEventBuffer<Int>())
    }

    func find(_ table: RouteTable, bytes target: String) -> (target: String, route: any EventRoute)? {
        Array(target.utf8).withUnsafeBytes { table.find($0) }
    }

    @Test func aTargetIsFoundInAnyASCIICaseAndNamedAsRegistered() {
        var table = RouteTable()
        let events = route(["TransactionCreated", "BalanceUpdated"])
        table.add(events, for: ["TransactionCreated", "BalanceUpdated"])
        for spelling in ["TransactionCreated", "transactioncreated", "TRANSACTIONCREATED", "tRANSACTIONcREATED"] {
            let found = find(table, bytes: spelling)
            #expect(found?.target == "TransactionCreated", "\(spelling)")
            #expect(found?.route === events, "\(spelling)")
        }
        #expect(find(table, bytes: "balanceUPDATED")?.target == "BalanceUpdated")
        #expect(table.find("BALANCEUPDATED")?.target == "BalanceUpdated", "the tree path's lookup by String")
        // A prefix, a longer name, one letter off at the end and in the middle, nothing:
        for other in ["TransactionCreate", "TransactionCreatedX", "TransactionCreatee", "BalanceUpdatfd", ""] {
            #expect(find(table, bytes: other) == nil, "\(other)")
        }
        #expect(table.all.count == 1, "a route serving two targets is listed once")
    }

    /// ASCII letters fold byte by byte; a capital outside ASCII (here Ü) is left to the tree path, whose lookup
    /// lower-cases the whole String.
    @Test func aCapitalOutsideASCIIIsFoundByTheTreePathsLookup() {
        var table = RouteTable()
        table.add(route(["Überweisung"]), for: ["Überweisung"])
        #expect(find(table, bytes: "übERWEISUNG")?.target == "Überweisung")
        #expect(find(table, bytes: "Überweisung") == nil)
        #expect(table.find("Überweisung")?.target == "Überweisung")
        #expect(table.find("ÜBERWEISUNG")?.target == "Überweisung")
    }

    @Test func removingATargetKeepsItsRouteForTheOthersAndANewRouteTakesATargetOver() {
        var table = RouteTable()
        let first = route(["A", "B"])
        table.add(first, for: ["A", "B"])
        table.remove("a")
        #expect(find(table, bytes: "A") == nil)
        #expect(find(table, bytes: "B")?.route === first)
        #expect(table.all.count == 1)

        let second = route(["b"])
        table.add(second, for: ["b"])
        #expect(find(table, bytes: "B")?.route === second)
        #expect(find(table, bytes: "B")?.target == "b")
        #expect(table.all.count == 1 && table.all[0] === second, "the first route serves no target now")
        table.remove("B")
        #expect(table.isEmpty && table.all.isEmpty)
    }
}
