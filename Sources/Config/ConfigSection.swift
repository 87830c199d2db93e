import AllowanceAPI
import Foundation
import Yams

/// A YAML node with the key path that leads to it, for typed reads and errors that point at the line.
public struct ConfigSection {
    public let node: Node
    public let key: String
    public let file: String
    /// Where the key that names this node is written (a mapping's own mark is at its first entry).
    public var at: Mark?

    public init(node: Node, key: String, file: String, at: Mark? = nil) {
        self.node = node
        self.key = key
        self.file = file
        self.at = at
    }

    public func child(_ node: Node, _ key: String, at mark: Mark? = nil) -> ConfigSection {
        ConfigSection(node: node, key: key, file: file, at: mark)
    }

    /// A mistake at this node, or at its key `sub` (at the value's place with `value`: a compact sink's URL).
    public func error(_ message: String, fix: String, at sub: String? = nil, value: Bool = false) -> ConfigError {
        let map = node.mapping
        let place =
            sub.flatMap { s in map?.first { $0.key.string == s }?.value.mark ?? map?.keys.first { $0.string == s }?.mark
            }
            ?? (value ? node.mark : nil) ?? at ?? node.mark
        return ConfigError(
            file: file, line: place?.line ?? 0, column: place?.column ?? 0, key: sub.map { "\(key).\($0)" } ?? key,
            message, fix: fix)
    }

    public func allowOnly(_ keys: Set<String>) throws(ConfigError) {
        guard let map = node.mapping else { throw error("must be a mapping", fix: "indent its keys under it") }
        for (k, v) in map {
            let name = k.string ?? ""
            if !keys.contains(name) {
                let mark = k.mark ?? v.mark
                throw ConfigError(
                    file: file, line: mark?.line ?? 0, column: mark?.column ?? 0, key: "\(key).\(name)",
                    "is not a known key",
                    fix: Suggest.fix(for: name, in: keys))
            }
        }
    }

    public func string(_ k: String) throws(ConfigError) -> String? {
        guard let v = node.mapping?[k] else { return nil }
        guard let s = v.scalar?.string else {
            throw error("must be a single value", fix: "write it on one line", at: k)
        }
        return s
    }

    /// A value that names a file: a relative one is taken from the config file's folder.
    public func path(_ k: String) throws(ConfigError) -> String? {
        try string(k).map { ConfigSource.resolve($0, besides: file) }
    }

    /// A value or a list of values.
    public func strings(_ k: String) throws(ConfigError) -> [String] {
        guard let v = node.mapping?[k] else { return [] }
        if let s = v.scalar?.string { return [s] }
        guard let list = v.sequence else { throw error("must be a value or a list", fix: "e.g. [a, b]", at: k) }
        var out: [String] = []
        for item in list {
            guard let s = item.scalar?.string else {
                throw error("must be a list of values", fix: "e.g. [a, b]", at: k)
            }
            out.append(s)
        }
        return out
    }

    public func int(_ k: String) throws(ConfigError) -> Int? {
        guard let s = try string(k) else { return nil }
        guard let n = Int(s), n > 0 else { throw error("'\(s)' is not a whole number above 0", fix: "e.g. 5", at: k) }
        return n
    }

    public func bool(_ k: String) throws(ConfigError) -> Bool? {
        guard let s = try string(k) else { return nil }
        guard let value = ConfigBool.parse(s) else {
            throw error("'\(s)' is not true or false", fix: "write true or false", at: k)
        }
        return value
    }

    public func money(_ k: String) throws(ConfigError) -> Decimal? {
        guard let s = try string(k) else { return nil }
        // Plain decimals with at most two places, as `transaction add` takes them: no exponent, no third decimal.
        let digits = s.split(separator: ".", omittingEmptySubsequences: false)
        guard digits.count <= 2,
            digits.allSatisfy({ !$0.isEmpty && $0.allSatisfy(\.isASCII) && $0.allSatisfy(\.isNumber) }),
            let d = Decimal(string: s, locale: Locale(identifier: "en_US_POSIX"))
        else { throw error("'\(s)' is not an amount", fix: "write it like 5.00 (digits, at most two decimals)", at: k) }
        guard digits.count < 2 || digits[1].count <= 2 else {
            throw error(
                "'\(s)' has more than two decimals",
                fix: "money is in cents: write e.g. \(digits[0]).\(digits[1].prefix(2))", at: k)
        }
        return d
    }
}
