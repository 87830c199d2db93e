import Foundation

/// A command's failure at run time (not a usage mistake): said on one line as "Error: ..." without the usage text,
/// with the sysexits code that says its kind (`RelayCommand.main`); 1 when none does.
struct CLIError: Error, CustomStringConvertible {
    let description: String
    let code: Int32
    init(_ description: String, code: Int32 = 1) {
        self.description = description
        self.code = code
    }
}

/// The exit codes every command uses (sysexits.h), as `--help` lists them.
enum Exit {
    /// A wrong argument (the parser's own errors are 64 too).
    static let usage: Int32 = 64
    /// Well-formed, but naming nothing that exists (no child Dave, no sink nope), or data that cannot be used.
    static let dataError: Int32 = 65
    /// What the command needs is not there yet (no database: run the relay first).
    static let unavailable: Int32 = 69
    /// The database cannot be read or written.
    static let ioError: Int32 = 74
    static let config: Int32 = 78
}
