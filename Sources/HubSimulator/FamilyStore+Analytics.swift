import Foundation

/// The four analytics of the seeds' app (`/api/v1/analytics/children/{id}/...`), computed from the child's
/// transactions as they are stored: what a relay's own totals are checked against.
extension FamilyStore {
    /// Each transaction of the last `days` days, oldest first, with the balance it left.
    func balanceHistory(of childId: UUID, days: Int, now: Date = Date()) throws(APIFailure) -> [SimValue] {
        let since = now.addingTimeInterval(-Double(days) * 86400)
        return try known(childId).filter { $0.createdAt >= since }.map { t in
            [
                "date": SimJSON.time(t.createdAt), "balance": .number(t.balanceAfter),
                "transactionDescription": .string(t.description),
            ]
        }
    }

    /// Money in and out over the child's whole history; the savings rate is the part of the income kept, in percent
    /// with two decimals (0 without income).
    func incomeSpending(of childId: UUID) throws(APIFailure) -> SimValue {
        let all = try known(childId)
        let credits = all.filter { $0.type == "Credit" }
        let debits = all.filter { $0.type == "Debit" }
        let income = credits.reduce(Decimal(0)) { $0 + $1.amount }
        let spending = debits.reduce(Decimal(0)) { $0 + $1.amount }
        return [
            "totalIncome": .number(income), "totalSpending": .number(spending),
            "netSavings": .number(income - spending),
            "incomeTransactionCount": .number(Decimal(credits.count)),
            "spendingTransactionCount": .number(Decimal(debits.count)),
            "savingsRate": .number(income > 0 ? Self.rounded((income - spending) / income * 100) : 0),
        ]
    }

    /// Where the money went: the child's debits grouped by what they were for (the description, as the API's
    /// transactions carry no category), largest first, each with its share of the spending in percent.
    func spendingBreakdown(of childId: UUID) throws(APIFailure) -> [SimValue] {
        let debits = try known(childId).filter { $0.type == "Debit" }
        let total = debits.reduce(Decimal(0)) { $0 + $1.amount }
        let groups = Dictionary(grouping: debits, by: \.description).map { name, list in
            (name, list.reduce(Decimal(0)) { $0 + $1.amount }, list.count)
        }
        return groups.sorted { ($0.1, $1.0) > ($1.1, $0.0) }.map { name, amount, count in
            [
                "category": .string(name), "amount": .number(amount),
                "percentage": .number(total > 0 ? Self.rounded(amount / total * 100) : 0),
                "transactionCount": .number(Decimal(count)),
            ]
        }
    }

    /// The last `months` calendar months (UTC), oldest first, the current one last: money in and out, and the
    /// balance at the month's end (or now, for the current month).
    func monthlyComparison(of childId: UUID, months: Int, now: Date = Date()) throws(APIFailure) -> [SimValue] {
        let all = try known(childId)
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        calendar.locale = Locale(identifier: "en_US_POSIX")
        let thisMonth = calendar.date(from: calendar.dateComponents([.year, .month], from: now))!
        let opening =
            child(childId).map { c in
                all.first.map { $0.type == "Credit" ? $0.balanceAfter - $0.amount : $0.balanceAfter + $0.amount }
                    ?? c.currentBalance
            } ?? 0
        return (0..<months).reversed().map { back -> SimValue in
            let start = calendar.date(byAdding: .month, value: -back, to: thisMonth)!
            let end = calendar.date(byAdding: .month, value: 1, to: start)!
            let inMonth = all.filter { $0.createdAt >= start && $0.createdAt < end }
            let income = inMonth.filter { $0.type == "Credit" }.reduce(Decimal(0)) { $0 + $1.amount }
            let spending = inMonth.filter { $0.type == "Debit" }.reduce(Decimal(0)) { $0 + $1.amount }
            let ending = all.last { $0.createdAt < end }?.balanceAfter ?? opening
            let parts = calendar.dateComponents([.year, .month], from: start)
            return [
                "year": .number(Decimal(parts.year!)), "month": .number(Decimal(parts.month!)),
                "monthName": .string(calendar.standaloneMonthSymbols[parts.month! - 1]),
                "income": .number(income), "spending": .number(spending), "netSavings": .number(income - spending),
                "endingBalance": .number(ending),
            ]
        }
    }

    private func known(_ childId: UUID) throws(APIFailure) -> [SimTransaction] {
        guard child(childId) != nil else { throw APIFailure(status: 404, message: "Child \(childId) not found.") }
        return transactions(of: childId)
    }

    /// To two decimals, half away from zero, as .NET's `Math.Round(x, 2, MidpointRounding.AwayFromZero)`.
    static func rounded(_ value: Decimal) -> Decimal {
        var input = value
        var output = Decimal()
        NSDecimalRound(&output, &input, 2, .plain)
        return output
    }
}
