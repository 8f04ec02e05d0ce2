import TouchSyncAccessModel

/// Who a snapshot, board list or history request is for (docs/protocol.md,
/// "Requests on behalf of a user"): whose allowance it counts in and whose
/// access decides. A gateway asks for its users' thumbnails, lists and
/// histories with their tokens, so one user's requests cannot use up the
/// gateway's allowance for everyone (a watch-only invitee's GETs once made an
/// honest tab wait 18 s for its snapshot). Pure: the hub core and the history
/// service share it.
public struct RequestParty: Sendable, Equatable {
    /// Whose allowance the request counts in (nil: the connection's).
    public var allowanceKey: String?
    /// Whose role decides on an authenticated hub (nil on a plain one).
    public var user: String?
    /// The principal (a gateway) the user's request came through, whose role caps the user's.
    public var through: String?

    public init(allowanceKey: String?, user: String?, through: String? = nil) {
        self.allowanceKey = allowanceKey
        self.user = user
        self.through = through
    }

    /// The party of a request from the connection's `user` (authenticated:
    /// its key's name) asking on behalf of `actAs` / `token` (both empty: itself).
    public static func resolve(user: String?, actAs: String, token: String, access: AccessList?) -> Result<RequestParty, HubRefusal> {
        guard let access else {
            guard !actAs.isEmpty else { return .success(RequestParty(allowanceKey: user.map { "user " + $0 }, user: nil)) }
            guard actAs.utf8.count <= 128, Admission.isPrintableNamespace(actAs) else {
                return .failure(HubRefusal(.malformed, "act_as is at most 128 letters, digits, '-', '.', '_' and ':', not \(actAs)"))
            }
            return .success(RequestParty(allowanceKey: "on behalf of " + actAs, user: nil))
        }
        guard let user else { return .success(RequestParty(allowanceKey: nil, user: nil)) }
        guard !token.isEmpty else {
            guard actAs.isEmpty else { return .failure(HubRefusal(.forbidden, "act_as needs the user's token")) }
            return .success(RequestParty(allowanceKey: "user " + user, user: user))
        }
        guard let (invited, prefix) = access.delegatedPrefix(for: user, token: token), actAs.isEmpty || actAs.hasPrefix(prefix) else {
            return .failure(
                HubRefusal(.forbidden, "\(user) may not ask on behalf of this token: it needs acts_for in the access list and a token the list holds"))
        }
        return .success(RequestParty(allowanceKey: "user " + invited, user: invited, through: user))
    }

    /// Whether the party may watch `board` (always on a plain hub).
    public func mayWatch(_ board: String, access: AccessList?) -> Bool {
        guard let access else { return true }
        guard let user else { return false }
        if let through { return access.role(of: user, through: through, on: board) != nil }
        return access.role(of: user, on: board) != nil
    }
}
