import ArgumentParser
import TouchSyncWire
import TouchSyncAccess
import Foundation
import Logging
import TouchSyncHub
import TouchSyncHubCore
import TouchSyncJournal
import TouchSyncLoad
import UnixSignals

struct LoadCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "load",
        abstract: "Load a hub with simulated fingers; report latency, throughput, loss and convergence.",
        discussion: """
            Each simulated user is an agent with its own connection, drawing with several \
            fingers in real time: smooth curves, fingers touching down and lifting on their \
            own, touch ids reused, occasional cancels, coalesced and predicted samples. \
            Subscribers measure latency from a sample's creation to its application in \
            their replica. At the end every subscriber's board is compared, sample by \
            sample, with what was drawn. Without --hub an embedded hub runs in this process.
            Exits with status 1 when anything was lost or duplicated or a digest differs. \
            Ctrl-C (or SIGTERM) stops the drawing early: the run drains, checks and prints \
            (and writes) its report for what was drawn, marked as interrupted, and exits 130.

            The report gives the hub's CPU thread by thread, from the first tick to the \
            end of the drain: the embedded hub's threads, or with --hub-pid PID every \
            thread of an external hub on this machine (--hub-cpus pins them, --cpus the \
            generator).

            With --web http://HOST:PORT the users are browser tabs instead: WebSocket \
            clients of a `touchsync web` gateway speaking the page's wire (hello, numbered \
            touch messages with coalesced and predicted samples kept until acknowledged and \
            resent after a reconnect, snapshot and batches in order). They connect, stay idle \
            for --idle seconds, then draw (defaults: one finger at 60 Hz, one coalesced \
            sample). --boards spreads them (ten tabs per board: --boards users/10). When the \
            gateway runs on this machine, its CPU per sample, idle CPU, resident memory per \
            tab and threads are read from /proc (--hub-pid adds the hub's CPU per sample).
            """)

    @Option(parsing: .unconditional, help: "Simulated users (agents).") var users = 10
    @Option(parsing: .unconditional, help: "Fingers per user (default 3; 1 with --web).") var fingers: Int?
    @Option(parsing: .unconditional, help: "Input events per second per finger (default 120; 60 with --web).") var hz: Double?
    @Option(parsing: .unconditional, help: "Samples per input event, 2 for 240 Hz input (default 2; 1 with --web).") var coalesced: Int?
    @Option(parsing: .unconditional, help: "Predicted samples per touch change.") var predicted = 1
    @Option(parsing: .unconditional, help: "Seconds of drawing.") var duration = 5.0
    @Option(parsing: .unconditional, help: "After drawing: seconds to wait for every frame to be acknowledged (then half as long for subscribers); past it the run fails saying which agents or subscribers stuck.")
    var drainTimeout = 60.0
    @Option(parsing: .unconditional, help: "Stop once this many strokes have begun (if before --duration).") var strokes: Int?
    @Option(parsing: .unconditional, help: "Boards the users are spread over, named load-SEED-0 … load-SEED-(N-1) (user i draws on board i mod N as load-BOARD-k).") var boards = 1
    @Option(parsing: .unconditional, help: "Subscribers per board (connected before drawing starts).") var subscribers = 1
    @Flag(help: "Also start one subscriber per board half-way (snapshot plus diffs).") var lateSubscriber = false
    @Option(help: "The wire format of the agents' frames and the subscribers' stream: v1, or v2 (packed changes, packed appends on the boards' v2 topics).") var wire: WireOption = .v1
    @Flag(help: "With --wire v2: the subscribers follow the boards' streams without predicted tails.") var noPredictions = false
    @Option(parsing: .unconditional, help: "Seconds over which users start drawing one after another.") var rampUp = 0.0
    @Option(parsing: .unconditional, help: "Chance per event that a live touch is cancelled.") var cancelRate = 0.01
    @Option(parsing: .unconditional, help: "Seed for the fingers (same seed, same run).") var seed: UInt64 = 1
    @Option(parsing: .unconditional, help: "Threads driving the agents' connections (each user keeps its own connection).")
    var agentThreads = 2
    @Option(name: .customLong("hub"), help: "An external hub's ingest endpoint (default: an embedded hub).")
    var ingest: String?
    @Option(help: "The external hub's publish endpoint (default: the --hub port + 1; with several hubs listed, each one's), or a comma-separated list: subscribers follow each board to the hub that holds it.")
    var publish: String?
    @Option(help: "The external hub's snapshot endpoint (default: the --hub port + 2, each listed hub's), or a list as for --publish.") var snapshot: String?
    @Option(parsing: .unconditional, help: "The embedded hub's shortest milliseconds between two batches of a board (0: as soon as input is drained).")
    var publishIntervalMs = 0
    @Option(help: "Journal the embedded hub's boards into this folder (default: memory only).") var data: String?
    @Option(help: "With --data: when journal writes are made durable (batch, never, or an interval such as 20ms).")
    var fsync = "20ms"
    @Option(help: "Encrypt and authenticate every connection (CURVE): keys for the hub, each simulated user and the subscribers, and an access list, made (or reused) in this folder; the embedded hub uses them, an external one must run with DIR/hub.key and DIR/access.json.")
    var accessDir: String?
    @Option(help: "A cluster file: spread the boards over its hubs (each board on the hub the map gives it) instead of --hub.")
    var cluster: String?
    @Option(help: "Draw through a browser gateway (touchsync web) at this URL, as browser tabs over WebSockets.") var web: String?
    @Option(parsing: .unconditional, help: "With --web: seconds every tab stays connected and idle before drawing (what idle tabs cost).")
    var idle = 5.0
    @Option(parsing: .unconditional, help: "With --web: tabs per board that keep the whole board and measure latency.")
    var measuringTabs = 1
    @Option(help: "With --web: the gateway's process id (default: the process listening on the URL's port, when visible).")
    var gatewayPid: Int32?
    @Option(help: "The hub's process id (an external hub on this machine): its CPU per sample, thread by thread (with --web, beside the gateway's).")
    var hubPid: Int32?
    @Option(help: "With --web: the browser wire the tabs speak, packed2 (as the page does), packed, binary or json.") var browserWire = "packed2"
    @Option(help: "Pin this load generator's threads to these CPUs (taskset -c style: 0-3,6).") var cpus: String?
    @Option(help: "With --web: pin the gateway's threads (--gateway-pid, or the process on the URL's port) to these CPUs.")
    var gatewayCpus: String?
    @Option(help: "Pin the hub's threads (--hub-pid) to these CPUs.") var hubCpus: String?
    @Option(help: "Write the report as JSON to this file.") var json: String?
    @Option(help: "Write latency and throughput over time as an SVG chart to this file.") var svg: String?
    @OptionGroup var logging: LoggingOptions

    var fingerCount: Int { fingers ?? (web == nil ? 3 : 1) }
    var eventRate: Double { hz ?? (web == nil ? 120 : 60) }
    var samplesPerEvent: Int { coalesced ?? (web == nil ? 2 : 1) }

    func validate() throws {
        if let web {
            guard WebAddress(web) != nil else { throw ValidationError("--web takes the gateway's address, http://HOST:PORT") }
            guard ["packed2", "packed", "binary", "json"].contains(browserWire) else { throw ValidationError("--browser-wire is packed2, packed, binary or json, not \(browserWire)") }
            guard ingest == nil, cluster == nil, data == nil, accessDir == nil else {
                throw ValidationError("--web draws through a gateway: not with --hub, --cluster, --data or --access-dir")
            }
            guard idle >= 0 && idle <= 600 else { throw ValidationError("--idle must be 0 to 600 seconds") }
            guard (1...100).contains(measuringTabs) else { throw ValidationError("--measuring-tabs must be 1 to 100") }
        }
        try validateNoPredictions(noPredictions, wire: wire)
        if let ingest { try validateHubList(ingest) }
        // Lists (hubs sharing a board store): the subscribers follow each board to whichever holds it.
        for endpoint in publish?.split(separator: ",", omittingEmptySubsequences: false) ?? [] { try validateEndpoint(String(endpoint), option: "--publish") }
        for endpoint in snapshot?.split(separator: ",", omittingEmptySubsequences: false) ?? [] { try validateEndpoint(String(endpoint), option: "--snapshot") }
        if let publish, let snapshot, publish.split(separator: ",").count != snapshot.split(separator: ",").count {
            throw ValidationError("--publish and --snapshot list different numbers of hubs: list each hub in both, in the same order")
        }
        guard (1...5000).contains(users) else { throw ValidationError("--users must be 1 to 5000") }
        guard (1...10).contains(fingerCount) else { throw ValidationError("--fingers must be 1 to 10") }
        guard eventRate > 0 && eventRate <= 1000 else { throw ValidationError("--hz must be above 0 and at most 1000") }
        guard (1...32).contains(samplesPerEvent) else { throw ValidationError("--coalesced must be 1 to 32") }
        guard (0...16).contains(predicted) else { throw ValidationError("--predicted must be 0 to 16") }
        guard duration > 0 && duration <= 3600 else { throw ValidationError("--duration must be above 0 and at most 3600") }
        guard drainTimeout >= 1 && drainTimeout <= 3600 else { throw ValidationError("--drain-timeout must be 1 to 3600 seconds") }
        guard (1...1000).contains(boards), boards <= users else { throw ValidationError("--boards must be 1 to --users") }
        guard (1...100).contains(subscribers) else { throw ValidationError("--subscribers must be 1 to 100") }
        guard (0...1).contains(cancelRate) else { throw ValidationError("--cancel-rate must be between 0 and 1") }
        guard (1...64).contains(agentThreads) else { throw ValidationError("--agent-threads must be 1 to 64") }
        guard rampUp >= 0 && rampUp < duration else { throw ValidationError("--ramp-up must be at least 0 and below --duration") }
        guard FsyncPolicy(argument: fsync) != nil else {
            throw ValidationError("--fsync must be batch, never, or an interval such as 20ms or 1s")
        }
        if data != nil && ingest != nil { throw ValidationError("--data journals the embedded hub: not with --hub") }
        guard (0...10_000).contains(publishIntervalMs) else { throw ValidationError("--publish-interval-ms must be 0 to 10000") }
        if publishIntervalMs > 0 && ingest != nil { throw ValidationError("--publish-interval-ms sets the embedded hub: not with --hub") }
        if publish != nil || snapshot != nil, ingest == nil {
            throw ValidationError("--publish and --snapshot go with --hub")
        }
        if hubCpus != nil && hubPid == nil { throw ValidationError("--hub-cpus needs --hub-pid") }
        if hubPid != nil && web == nil && ingest == nil && cluster == nil {
            throw ValidationError("--hub-pid names an external hub's process: give its --hub too (without --hub the hub runs in this process and is measured anyway)")
        }
        if let hubPid, ProcessStats.read(pid: hubPid) == nil {
            throw ValidationError("--hub-pid \(hubPid): no such process visible here (the hub must run on this machine)")
        }
        if let ingest, Self.port(of: ingest) == nil, publish == nil || snapshot == nil {
            throw ValidationError("cannot derive ports from --hub \(ingest): give --publish and --snapshot")
        }
    }

    static func port(of endpoint: String) -> Int? {
        endpoint.split(separator: ":").last.flatMap { Int($0) }
    }

    func run() async throws {
        if let cpus {
            guard let set = CPUSet(cpus) else { throw ValidationError("--cpus takes CPUs as taskset -c writes them (0-3,6), not \(cpus)") }
            try set.pin()  // before the generator's threads start: they inherit it
            FileHandle.standardError.write(Data("load generator pinned to CPUs \(set)\n".utf8))
        }
        if let web, let address = WebAddress(web) { return try await runWeb(address) }
        var configuration = LoadConfiguration()
        configuration.users = users
        configuration.fingers = fingerCount
        configuration.hz = eventRate
        configuration.coalesced = samplesPerEvent
        configuration.predicted = predicted
        configuration.duration = Duration(secondsValue: duration)
        configuration.drainTimeout = Duration(secondsValue: drainTimeout)
        configuration.strokes = strokes
        configuration.boards = boards
        configuration.subscribers = subscribers
        configuration.wireFormat = wire.format
        configuration.subscriberPredictions = !noPredictions
        configuration.lateSubscriber = lateSubscriber
        configuration.rampUp = Duration(secondsValue: rampUp)
        configuration.cancelRate = cancelRate
        configuration.seed = seed
        configuration.agentThreads = agentThreads
        configuration.hubPID = hubPid
        if let set = hubCpus.flatMap(CPUSet.init), let pid = hubPid {
            try set.pin(pid: pid)
            FileHandle.standardError.write(Data("hub (pid \(pid)) pinned to CPUs \(set)\n".utf8))
        } else if let hubCpus {
            throw ValidationError("--hub-cpus takes CPUs as taskset -c writes them (0-3,6), not \(hubCpus)")
        }
        configuration.embeddedHub.timing.publishInterval = .milliseconds(publishIntervalMs)
        if let data {
            var journal = JournalConfiguration(directory: data)
            journal.fsync = FsyncPolicy(argument: fsync) ?? journal.fsync
            configuration.embeddedHub.journal = journal
        }
        if let cluster {
            do {
                configuration.cluster = try ClusterMap.load(from: cluster)
            } catch {
                throw CommandFailure(error.description)
            }
        }
        if let ingest {
            // Each listed hub's publish and snapshot endpoints default to its ingest port + 1 and + 2.
            func derived(_ offset: Int) -> String {
                ingest.split(separator: ",").map { endpoint in
                    "\(endpoint.split(separator: ":").dropLast().joined(separator: ":")):\((Self.port(of: String(endpoint)) ?? 0) + offset)"
                }.joined(separator: ",")
            }
            configuration.hub = HubEndpoints(ingest: ingest, publish: publish ?? derived(1), snapshot: snapshot ?? derived(2))
        }
        // After the hubs are known: against external hubs only their public key is needed.
        if let accessDir {
            do {
                configuration.keys = try LoadKeys.prepare(in: accessDir, for: configuration)
            } catch {
                throw CommandFailure("cannot prepare the keys in \(accessDir): \(error)")
            }
            emit("CURVE: keys and access list in \(accessDir) (\(users) users, a watcher, the hub)")
        }
        emit(
            "load: \(users) users x \(fingerCount) fingers at \(Int(eventRate)) Hz (\(samplesPerEvent) samples per event, \(predicted) predicted), "
                + "\(boards) board(s), \(subscribers) subscriber(s) each, \(duration) s, hub "
                + (configuration.cluster.map { "cluster of \($0.hubs.count)" } ?? configuration.hub?.ingest ?? "embedded") + (data.map { ", journal \($0) (fsync \(fsync))" } ?? "")
                + "; up to \(Int(configuration.offeredSamplesPerSecond)) samples/s offered")
        let run = LoadRun(configuration: configuration, logger: logging.logger("touchsync.load"))
        let interruption = LoadInterruption()
        // Trapped before anything runs: a Ctrl-C before a task installed the trap would end the process by the signal.
        let firstInterrupt = await UnixSignalsSequence(trapping: .sigint, .sigterm)
        let signals = Task {
            for await _ in firstInterrupt {
                emit("interrupted: stopping the drawing, draining and checking what was drawn (again to quit at once)")
                interruption.request()
                break
            }
            // A second Ctrl-C quits without the report.
            for await _ in await UnixSignalsSequence(trapping: .sigint, .sigterm) { Foundation.exit(130) }
        }
        defer { signals.cancel() }
        let report = try await run.run(interruption: interruption) { progress in
            emit(
                String(
                    format: "  %5.1f s  %9.0f samples/s  %5d touches down  latency p50 %6d µs  p99 %7d µs",
                    progress.elapsed.seconds, progress.samplesPerSecond, progress.liveTouches, progress.latencyP50,
                    progress.latencyP99))
        }
        emit(report.text)
        if let json {
            try report.json.write(to: URL(fileURLWithPath: json))
            emit("report written to \(json)")
        }
        if let svg {
            try report.svg.write(toFile: svg, atomically: true, encoding: .utf8)
            emit("chart written to \(svg)")
        }
        if report.interrupted { throw ExitCode(130) }
        if !report.passed { throw ExitCode.failure }
    }

    /// `--web`: the users as browser tabs of a gateway.
    func runWeb(_ address: WebAddress) async throws {
        var configuration = WebLoadConfiguration()
        configuration.host = address.host
        configuration.port = address.port
        configuration.tabs = users
        configuration.tabsPerBoard = (users + boards - 1) / boards
        configuration.fingers = fingerCount
        configuration.hz = eventRate
        configuration.coalesced = samplesPerEvent
        configuration.predicted = predicted
        configuration.duration = Duration(secondsValue: duration)
        configuration.idle = Duration(secondsValue: idle)
        configuration.measuringTabsPerBoard = measuringTabs
        configuration.clientThreads = agentThreads
        configuration.cancelRate = cancelRate
        configuration.seed = seed
        configuration.gatewayPID = gatewayPid
        configuration.hubPID = hubPid
        configuration.browserWire = browserWire
        // CPU sets, so one command measures a many-core machine with the parts on cores of their own.
        for (text, option) in [(cpus, "--cpus"), (gatewayCpus, "--gateway-cpus"), (hubCpus, "--hub-cpus")] {
            if let text, CPUSet(text) == nil { throw ValidationError("\(option) takes CPUs as taskset -c writes them (0-3,6), not \(text)") }
        }
        if let set = gatewayCpus.flatMap(CPUSet.init) {
            guard let pid = gatewayPid ?? ProcessStats.listener(onPort: address.port) else {
                throw ValidationError("--gateway-cpus: no gateway process found on port \(address.port) (pass --gateway-pid)")
            }
            try set.pin(pid: pid)
            emit("gateway (pid \(pid)) pinned to CPUs \(set)")
        }
        if let set = hubCpus.flatMap(CPUSet.init), let pid = hubPid {
            try set.pin(pid: pid)
            emit("hub (pid \(pid)) pinned to CPUs \(set)")
        }
        emit(
            "load --web: \(users) tabs (\(browserWire) wire) x \(fingerCount) finger(s) at \(Int(eventRate)) Hz (\(samplesPerEvent) samples per event, \(predicted) predicted), "
                + "\(configuration.boards) board(s), \(duration) s, gateway http://\(address.host):\(address.port); up to \(Int(configuration.offeredSamplesPerSecond)) samples/s offered")
        let run = WebLoadRun(configuration: configuration, logger: logging.logger("touchsync.load"))
        let interruption = LoadInterruption()
        // Trapped before anything runs: a Ctrl-C before a task installed the trap would end the process by the signal.
        let firstInterrupt = await UnixSignalsSequence(trapping: .sigint, .sigterm)
        let signals = Task {
            for await _ in firstInterrupt {
                emit("interrupted: stopping the drawing, draining and checking what was drawn (again to quit at once)")
                interruption.request()
                break
            }
            for await _ in await UnixSignalsSequence(trapping: .sigint, .sigterm) { Foundation.exit(130) }
        }
        defer { signals.cancel() }
        let report: WebLoadReport
        do {
            report = try await run.run(interruption: interruption) { emit($0) }
        } catch let error as WebLoadError {
            throw CommandFailure(error.description)
        }
        emit(report.text)
        if let json {
            try report.json.write(to: URL(fileURLWithPath: json))
            emit("report written to \(json)")
        }
        if interruption.isRequested { throw ExitCode(130) }
        if !report.passed { throw ExitCode.failure }
    }
}

/// `http://HOST:PORT` (or ws://), as `--web` takes it.
struct WebAddress {
    var host: String
    var port: Int

    init?(_ text: String) {
        guard let url = URL(string: text), let scheme = url.scheme, ["http", "ws"].contains(scheme), let host = url.host, !host.isEmpty else {
            return nil
        }
        self.host = host
        self.port = url.port ?? 80
    }
}
