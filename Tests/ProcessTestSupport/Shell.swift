import Foundation
import Synchronization
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Root can mount a read-only file system for a test; others cannot.
public let isRoot = getuid() == 0


/// Runs a system command (mount, ip, tc) and returns its exit status.
@discardableResult
public func touchsyncShell(_ arguments: [String]) throws -> Int32 {
    let null = nullDevice()
    defer { close(null) }
    let child = try Child.spawn("/usr/bin/env", arguments, output: null, errors: null)
    while child.isRunning { usleep(5_000) }  // short-lived system commands: a brief wait
    return child.terminationStatus
}

/// Two hosts on one machine: network namespaces joined by a veth pair,
/// created by the test and removed after it. Root only.
public final class NamespacePair {
    public let hub: String
    public let agents: String
    public let hubAddress: String
    private let hubLink: String
    private let agentsLink: String

    /// Creates the pair on a thread of its own: its eleven `ip` commands
    /// wait for their children, which must not hold one of the cooperative
    /// pool's two threads on a loaded machine.
    public static func create(tag: String, subnet: Int) async throws -> NamespacePair {
        try await offThePool { try NamespacePair(tag: tag, subnet: subnet) }
    }

    private init(tag: String, subnet: Int) throws {
        let suffix = "\(tag)\(Int.random(in: 1000...9999))"
        hub = "tsh-\(testRunTag)-\(suffix)"
        agents = "tsa-\(testRunTag)-\(suffix)"
        hubLink = "th\(suffix)"
        agentsLink = "ta\(suffix)"
        hubAddress = "10.77.\(subnet).1"
        let steps: [[String]] = [
            ["ip", "netns", "add", hub], ["ip", "netns", "add", agents],
            ["ip", "link", "add", hubLink, "type", "veth", "peer", "name", agentsLink],
            ["ip", "link", "set", hubLink, "netns", hub], ["ip", "link", "set", agentsLink, "netns", agents],
            ["ip", "-n", hub, "addr", "add", "\(hubAddress)/24", "dev", hubLink],
            ["ip", "-n", agents, "addr", "add", "10.77.\(subnet).2/24", "dev", agentsLink],
            ["ip", "-n", hub, "link", "set", "lo", "up"], ["ip", "-n", agents, "link", "set", "lo", "up"],
            ["ip", "-n", hub, "link", "set", hubLink, "up"], ["ip", "-n", agents, "link", "set", agentsLink, "up"],
        ]
        for step in steps {
            guard try touchsyncShell(step) == 0 else {
                remove()
                throw TestFailure("network namespace setup failed at: \(step.joined(separator: " "))")
            }
        }
    }

    /// The agents' side of the link down (nothing passes) or up again.
    public func link(up: Bool) async throws {
        let (agents, agentsLink) = (agents, agentsLink)
        try await offThePool { try Self.setLink(agentsLink, in: agents, up: up) }
    }

    /// A fault of a set length: the agents' link down, or `lossPercent` of
    /// the packets lost, for `seconds`, then whole again. Timed on a thread
    /// of its own: with a `Task.sleep` on a cooperative pool held by a full
    /// run, a 20 s outage let the hub hear nothing for over 30 s, past its
    /// abandon time-out, and it cancelled the users' touches.
    public func fault(for seconds: Double, lossPercent: Int? = nil) async throws {
        let (agents, agentsLink) = (agents, agentsLink)
        try await offThePool {
            if let lossPercent { try Self.lose(percent: lossPercent, in: agents) } else { try Self.setLink(agentsLink, in: agents, up: false) }
            usleep(useconds_t(seconds * 1_000_000))
            if lossPercent != nil { try Self.lose(percent: nil, in: agents) } else { try Self.setLink(agentsLink, in: agents, up: true) }
        }
    }

    private static func setLink(_ link: String, in namespace: String, up: Bool) throws {
        guard try touchsyncShell(["ip", "-n", namespace, "link", "set", link, up ? "up" : "down"]) == 0 else {
            throw TestFailure("ip link set \(link) \(up ? "up" : "down") failed")
        }
    }

    /// Random loss of `percent` of the packets both ways on the agents' side,
    /// or none (nftables' `numgen random`: this kernel has no netem, so no delay).
    private static func lose(percent: Int?, in agents: String) throws {
        if let percent {
            let rules = [
                ["add", "table", "inet", "loss"],
                ["add", "chain", "inet", "loss", "in", "{ type filter hook input priority 0; }"],
                ["add", "chain", "inet", "loss", "out", "{ type filter hook output priority 0; }"],
                ["add", "rule", "inet", "loss", "in", "numgen", "random", "mod", "100", "<", "\(percent)", "drop"],
                ["add", "rule", "inet", "loss", "out", "numgen", "random", "mod", "100", "<", "\(percent)", "drop"],
            ]
            for rule in rules {
                guard try touchsyncShell(["ip", "netns", "exec", agents, "nft"] + rule) == 0 else { throw TestFailure("nft \(rule) failed") }
            }
        } else {
            _ = try touchsyncShell(["ip", "netns", "exec", agents, "nft", "delete", "table", "inet", "loss"])
        }
    }

    /// `touchsync ARGUMENTS` run inside namespace `namespace`.
    public func run(in namespace: String, _ arguments: [String], children: ChildProcesses) throws -> (Child, ChildOutput) {
        try children.run(arguments, limit: 120, namespace: namespace)
    }

    public func remove() {
        _ = try? touchsyncShell(["ip", "netns", "del", hub])
        _ = try? touchsyncShell(["ip", "netns", "del", agents])
    }

    deinit { remove() }
}

/// Reads a child's output until `condition` holds for it (or the child closes it).
public func readUntil(_ output: ChildOutput, into text: inout String, _ condition: (String) -> Bool) async {
    while !condition(text) {
        let chunk = await output.nextChunk()
        if chunk.isEmpty { return }
        text += String(decoding: chunk, as: UTF8.self)
    }
}

