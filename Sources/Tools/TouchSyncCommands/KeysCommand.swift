import ArgumentParser
import Foundation
import TouchSyncAccess
import ZeroMQ

/// `touchsync keys …`: CURVE key pairs and the hub's access list, so nobody
/// pastes keys by hand.
struct KeysCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "keys",
        abstract: "Make CURVE keys and manage a hub's access list (who may connect, and what each may do where).",
        discussion: """
            A hub started with --key and --access encrypts every connection and \
            accepts only the users its access list names: each user's public key \
            and, per board pattern (*, a prefix like team-*, or a board name; the \
            most specific one that matches decides), a role: watch (subscribe, \
            snapshots, history), draw (also draw and clear one's own strokes) or \
            admin (also clear the whole board). The hub re-reads the list on \
            SIGHUP. See docs/security.md.

              touchsync keys generate hub --dir keys
              touchsync keys generate alice --dir keys
              touchsync keys allow alice --boards 'team-*' --role draw --access access.json --dir keys
              touchsync hub --public --key keys/hub.key --access access.json
              touchsync draw --hub tcp://HUB:5570 --key keys/alice.key --hub-key keys/hub.pub --board team-1

            Browser users get an invitation link instead of a key; the gateway \
            (touchsync web) has a key whose entry may act for them:

              touchsync keys generate gateway --dir keys
              touchsync keys allow gateway --boards '*' --role admin --acts-for web: --access access.json --dir keys
              touchsync keys invite ann --boards 'team-*' --role draw --access access.json --url http://HOST:8080
            """,
        subcommands: [Generate.self, Allow.self, Invite.self, Revoke.self, List.self]
    )

    struct Generate: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Write a new CURVE key pair: DIR/NAME.key (secret, mode 0600) and DIR/NAME.pub (the public key, safe to share).")
        @Argument(help: "The key's name (a user name for a client, e.g. alice; hub for a hub).") var name: String
        @Option(help: "Folder for the key files (created if missing).") var dir = "."
        @Flag(help: "Replace an existing NAME.key (whoever used the old key is locked out).") var force = false

        func validate() throws {
            guard AccessList.isValidUserName(name) else {
                throw ValidationError("NAME must be 1 to 64 letters, digits, '-', '_' or '.'")
            }
        }

        func run() throws {
            guard ZMQCurve.isAvailable else { throw CommandFailure("this libzmq has no CURVE support (it must be built with libsodium)") }
            let generated = try ZMQCurve.generateKeyPair()
            do {
                try CurveKeyFiles.write(
                    CurveKeyPair(publicKey: generated.publicKey, secretKey: generated.secretKey), name: name, directory: dir, force: force)
            } catch {
                throw CommandFailure(error.description)
            }
            emit("wrote \(CurveKeyFiles.secretPath(name: name, directory: dir)) (secret: keep it private)")
            emit("wrote \(CurveKeyFiles.publicPath(name: name, directory: dir)) (public key \(generated.publicKey))")
        }
    }

    struct Allow: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Add or update a user in an access list, from DIR/NAME.pub (the list is created if missing).")
        @Argument(help: "The user's name; its public key is read from DIR/NAME.pub.") var name: String
        @Option(parsing: .upToNextOption, help: "Board patterns: *, a prefix ending in * (team-*), or board names.")
        var boards: [String]
        @Option(help: "watch, draw or admin.") var role: String
        @Option(help: "The access list file (JSON).") var access: String
        @Option(help: "Folder of NAME.pub.") var dir = "."
        @Option(help: "The public key itself (40 Z85 characters) or a .pub file, instead of DIR/NAME.pub.") var key: String?
        @Option(help: "Let this user (a gateway: touchsync web) act for invited browser users, in namespaces starting with this prefix (web:).")
        var actsFor: String?

        func validate() throws {
            guard AccessList.isValidUserName(name) else { throw ValidationError("NAME must be 1 to 64 letters, digits, '-', '_' or '.'") }
            guard Role(rawValue: role) != nil else { throw ValidationError("--role must be watch, draw or admin") }
            guard !boards.isEmpty else { throw ValidationError("--boards needs at least one pattern") }
            for pattern in boards {
                do { _ = try BoardPattern(pattern) } catch { throw ValidationError("--boards: \(error.description)") }
            }
        }

        func run() throws {
            let publicKey: String
            do {
                publicKey = try CurveKeyFiles.readPublicKey(key ?? CurveKeyFiles.publicPath(name: name, directory: dir))
            } catch {
                throw CommandFailure("\(error.description) (make one with: touchsync keys generate \(name) --dir \(dir))")
            }
            var list = try existingList(access)
            var entry = list.users[name] ?? AccessEntry(key: publicKey, boards: [:])
            entry.key = publicKey
            entry.token = nil
            if let actsFor { entry.actsFor = actsFor }
            for pattern in boards { entry.boards[pattern] = Role(rawValue: role)! }
            do {
                try list.set(name, entry)
                try list.save(to: access)
            } catch {
                throw CommandFailure(error.description)
            }
            emit("\(name): " + describe(entry) + " in \(access) (a running hub applies it on SIGHUP)")
        }
    }

    struct Invite: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Invite a browser user: a secret token in the access list, and the link that carries it (inviting again replaces the old link).")
        @Argument(help: "The user's name (their namespace is web:NAME:… through the gateway).") var name: String
        @Option(parsing: .upToNextOption, help: "Board patterns: *, a prefix ending in * (team-*), or board names.")
        var boards: [String]
        @Option(help: "watch, draw or admin.") var role: String
        @Option(help: "The access list file (JSON; written with mode 0600, it holds secrets).") var access: String
        @Option(help: "The gateway's address as browsers reach it.") var url = "http://127.0.0.1:8080"

        func validate() throws {
            guard AccessList.isValidUserName(name) else { throw ValidationError("NAME must be 1 to 64 letters, digits, '-', '_' or '.'") }
            guard Role(rawValue: role) != nil else { throw ValidationError("--role must be watch, draw or admin") }
            guard !boards.isEmpty else { throw ValidationError("--boards needs at least one pattern") }
            for pattern in boards {
                do { _ = try BoardPattern(pattern) } catch { throw ValidationError("--boards: \(error.description)") }
            }
            guard url.hasPrefix("http://") || url.hasPrefix("https://") else { throw ValidationError("--url is http://HOST:PORT or https://…") }
        }

        func run() throws {
            var list = try existingList(access)
            if list.users[name]?.key != nil {
                throw CommandFailure("\(name) has a key in \(access): a user signs in either with a key or with an invitation")
            }
            var generator = SystemRandomNumberGenerator()  // getrandom(2)
            let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
            let token = String((0..<32).map { _ in alphabet[Int(generator.next(upperBound: UInt64(alphabet.count)))] })
            var entry = AccessEntry(token: token, boards: list.users[name]?.boards ?? [:])
            for pattern in boards { entry.boards[pattern] = Role(rawValue: role)! }
            do {
                try list.set(name, entry)
                try list.save(to: access)
            } catch {
                throw CommandFailure(error.description)
            }
            let base = url.hasSuffix("/") ? String(url.dropLast()) : url
            emit("\(name): " + describe(entry) + " in \(access) (the hub and the gateway apply it on SIGHUP)")
            emit("send \(name) this link (it is their password; the token stays in the address's fragment, never in a request):")
            emit("  \(base)/#token=\(token)")
        }
    }

    struct Revoke: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Remove a user from an access list.")
        @Argument(help: "The user's name.") var name: String
        @Option(help: "The access list file (JSON).") var access: String

        func run() throws {
            var list = try existingList(access, mustExist: true)
            guard list.remove(name) != nil else { throw CommandFailure("\(access) has no user \(name)") }
            do { try list.save(to: access) } catch { throw CommandFailure(error.description) }
            emit("\(name) removed from \(access) (a running hub applies it on SIGHUP)")
        }
    }

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print an access list: each user, its key and its roles.")
        @Option(help: "The access list file (JSON).") var access: String

        func run() throws {
            let list = try existingList(access, mustExist: true)
            if list.users.isEmpty { emit("\(access): no users") }
            for (name, entry) in list.users.sorted(by: { $0.key < $1.key }) {
                let credential = entry.key ?? "(browser user: invitation token)"
                emit("\(name)  \(credential)  " + describe(entry) + (entry.actsFor.map { ", acts for \($0)…" } ?? ""))
            }
        }
    }
}

private func existingList(_ path: String, mustExist: Bool = false) throws -> AccessList {
    guard FileManager.default.fileExists(atPath: path) else {
        if mustExist { throw CommandFailure("no access list at \(path)") }
        return try AccessList()
    }
    do {
        return try AccessList.load(from: path)
    } catch {
        throw CommandFailure(error.description)
    }
}

private func describe(_ entry: AccessEntry) -> String {
    entry.boards.sorted(by: { $0.key < $1.key }).map { "\($0.value) on \($0.key)" }.joined(separator: ", ")
}
