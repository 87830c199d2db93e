import Foundation

/// Dates in the CLI's tables and JSON.
func iso(_ date: Date) -> String { Date.ISO8601FormatStyle().format(date) }

/// Plain aligned columns for terminals.
enum Table {
    static func render(_ rows: [[String]], rightAligned: Set<Int> = []) -> String {
        guard let width = rows.map(\.count).max() else { return "" }
        let widths = (0..<width).map { col in rows.map { col < $0.count ? $0[col].count : 0 }.max() ?? 0 }
        return rows.map { row in
            row.enumerated().map { col, cell in
                let pad = String(repeating: " ", count: widths[col] - cell.count)
                return rightAligned.contains(col) ? pad + cell : cell + pad
            }.joined(separator: "  ").trimmingCharacters(in: .whitespaces)
        }.joined(separator: "\n")
    }
}
