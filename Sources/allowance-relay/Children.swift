import AllowanceAPI
import Config

enum Children {
    /// The child `given` names (a first name or an id, any case), or the error that lists the children there are.
    static func find(_ given: String, in children: [Child]) throws(CLIError) -> Child {
        guard
            let match = children.first(where: {
                $0.id.lowercased == given.lowercased() || $0.firstName.lowercased() == given.lowercased()
            })
        else { throw CLIError(unknown(given, children), code: Exit.dataError) }
        return match
    }

    /// "No child 'Dave' in the cache; the children are Alice, Bob and Carol." (or how to fill the cache).
    static func unknown(_ given: String, _ children: [Child]) -> String {
        let names = children.map(\.firstName)
        guard !names.isEmpty else {
            return
                "No child '\(given)' in the cache, which has no children yet: run `allowance-relay run` once while the backend is reachable."
        }
        let list = names.count == 1 ? names[0] : names.dropLast().joined(separator: ", ") + " and " + names.last!
        let near = Suggest.closest(to: given, in: names).map { " Did you mean \($0)?" } ?? ""
        return "No child '\(given)' in the cache; the children are \(list) (a first name or an id).\(near)"
    }
}
