import AllowanceAPI
import Foundation
import Yams

/// One mistake in the configuration, said like a compiler says it: where (file:line:column, or the environment
/// variable that set the value), which key, what is wrong, and the fix.
public struct ConfigError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The config file's path, or `environment` when an `ALLOWANCE_RELAY_*` variable set the value.
    public let file: String
    /// From 1; 0 when the mistake has no place in the file (a missing key, a file that cannot be read).
    public let line: Int
    public let column: Int
    /// The dotted key (`sinks.chat.url`, `rules[0].to`), or the variable's name; empty for the whole file.
    public let key: String
    public let message: String
    public let fix: String

    public init(file: String, line: Int = 0, column: Int = 0, key: String, _ message: String, fix: String) {
        self.file = file
        self.line = line
        self.column = column
        self.key = key
        self.message = message
        self.fix = fix
    }

    /// `relay.yaml:4:5: sinks.chat.urll: is not a known key. Fix: did you mean url?`
    public var description: String {
        let place = line > 0 ? "\(file):\(line):\(column)" : file
        let end = fix.last.map { ".?!".contains($0) } == true ? "" : "."
        return "\(place): \(key.isEmpty ? "" : key + ": ")\(message). Fix: \(fix)\(end)"
    }
}

/// Every mistake found in one read of the configuration, in the file's order.
public struct ConfigErrors: Error, Sendable, CustomStringConvertible {
    public var all: [ConfigError]
    public init(_ all: [ConfigError]) { self.all = all }

    /// The mistakes found by several readers of one configuration, each once (two readers may meet the same one),
    /// in the file's order.
    public init(merging found: [ConfigError]) {
        var seen = Set<String>()
        all = found.filter { seen.insert($0.description).inserted }.sorted {
            ($0.line, $0.column) < ($1.line, $1.column)
        }
    }
    public var description: String { all.map(\.description).joined(separator: "\n") }
    /// One line, for the log.
    public var message: String { all.map(\.description).joined(separator: "; ") }

    /// What `run` and `config check` print: one line per mistake, like a compiler's.
    public var report: String {
        let head =
            all.count == 1
            ? "allowance-relay: configuration error:" : "allowance-relay: \(all.count) configuration errors:"
        return ([head] + all.map { "  " + $0.description }).joined(separator: "\n") + "\n"
    }
}

/// The config file, parsed once: every part of the program reads its keys from this one tree (the settings of
/// the connection and the store, and the relay's sinks, rules and templates), and every mistake points into it.
public struct ConfigFile: @unchecked Sendable {
    // @unchecked: Yams' Node is a value type of strings and arrays, never mutated after the parse.
    public let path: String
    public let root: Node?

    /// Reads and parses `path`; a file that cannot be read or is not YAML is one error with its place.
    public static func read(_ path: String) throws(ConfigErrors) -> ConfigFile {
        guard FileManager.default.isReadableFile(atPath: path),
            let text = try? String(contentsOfFile: path, encoding: .utf8)
        else {
            throw ConfigErrors([
                ConfigError(file: path, key: "", "cannot be read", fix: "check the path and its permissions")
            ])
        }
        return try parse(text, path: path)
    }

    public static func parse(_ text: String, path: String) throws(ConfigErrors) -> ConfigFile {
        do {
            // `.basic`: every value is read as text and checked by the schema, so Yams' implicit typing is not needed,
            // and its regular expressions (NSRegularExpression, on ICU) would cost every relay 2 MB of resident code.
            return ConfigFile(path: path, root: try Yams.compose(yaml: text, .basic))
        } catch let error as YamlError {
            throw ConfigErrors([syntaxError(error, path: path)])
        } catch {
            throw ConfigErrors([
                ConfigError(file: path, key: "", "is not valid YAML: \(error)", fix: "fix the YAML syntax")
            ])
        }
    }

    /// libyaml's words, put the way every other mistake is said, with the place libyaml found.
    static func syntaxError(_ error: YamlError, path: String) -> ConfigError {
        let fix = "check the indentation (spaces, not tabs) and the quoting on this line and the one above"
        switch error {
        case .scanner(let context, let problem, let mark, _), .parser(let context, let problem, let mark, _),
            .composer(let context, let problem, let mark, _):
            let what = context.map { "\($0.text), \(problem)" } ?? problem
            // libyaml finds an unclosed quote or bracket at the end of the file, past its last line: the mistake
            // is where the thing it was reading began (its context), so the line named is one the file has.
            let place = problem.contains("end of stream") ? context?.mark ?? mark : mark
            return ConfigError(
                file: path, line: place.line, column: place.column, key: "", "YAML syntax: \(what)", fix: fix)
        case .duplicatedKeysInMapping(let duplicates, let context):
            return ConfigError(
                file: path, line: context.mark.line, column: context.mark.column,
                key: duplicates.joined(separator: ", "),
                "is written twice in one mapping", fix: "keep one of them")
        default:
            return ConfigError(file: path, key: "", "is not valid YAML: \(error)", fix: fix)
        }
    }

    /// The node at a key path (`["server", "url"]`), if the file has it.
    func node(_ path: [String]) -> Node? {
        var node = root
        for part in path { node = node?.mapping?[part] }
        return node
    }

    /// Where a key is written (its name's line and column), for messages about its value.
    func place(_ path: [String]) -> (line: Int, column: Int)? {
        guard let last = path.last else { return nil }
        var parent = root
        for part in path.dropLast() { parent = parent?.mapping?[part] }
        guard let map = parent?.mapping, let key = map.keys.first(where: { $0.string == last }), let mark = key.mark
        else { return nil }
        return (mark.line, mark.column)
    }
}

/// Suggestions for a misspelt key or value ("did you mean"): the known words within a small edit distance.
public enum Suggest {
    /// The closest of `known` to `word`, if it is close enough to be what was meant.
    public static func closest(to word: String, in known: some Sequence<String>) -> String? {
        // One edit in a word of three letters or more, up to three in long ones; a letter or two is no word to fix.
        let limit = word.count < 3 ? 0 : max(1, min(3, word.count / 3))
        let scored = known.map { ($0, distance(word.lowercased(), $0.lowercased())) }.filter { $0.1 <= limit }
        return scored.min { $0.1 < $1.1 || ($0.1 == $1.1 && $0.0 < $1.0) }?.0
    }

    /// "did you mean X?" when one is close, else the list of what exists.
    public static func fix(for word: String, in known: some Collection<String>, prefix: String = "") -> String {
        if let near = closest(to: word, in: known) { return "did you mean \(prefix)\(near)?" }
        return "use one of " + known.sorted().map { prefix + $0 }.joined(separator: ", ")
    }

    /// Levenshtein distance, with a swap of two neighbours counted as one edit (`utl` for `url`).
    static func distance(_ a: String, _ b: String) -> Int {
        let a = Array(a.unicodeScalars)
        let b = Array(b.unicodeScalars)
        if a.isEmpty || b.isEmpty { return max(a.count, b.count) }
        var d = [[Int]](repeating: [Int](repeating: 0, count: b.count + 1), count: a.count + 1)
        for i in 0...a.count { d[i][0] = i }
        for j in 0...b.count { d[0][j] = j }
        for i in 1...a.count {
            for j in 1...b.count {
                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost)
                if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] {
                    d[i][j] = min(d[i][j], d[i - 2][j - 2] + 1)
                }
            }
        }
        return d[a.count][b.count]
    }
}
