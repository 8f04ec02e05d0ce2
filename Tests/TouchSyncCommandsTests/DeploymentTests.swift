import ProcessTestSupport
import TestSupport
import Foundation
import Synchronization
import Testing
import TouchSyncAccess

/// compose.yaml (issue 13): valid for docker-compose, and its topology run
/// for real without a container engine: each service a process in its own
/// network namespace with its own address, the others reachable by their
/// service names (the namespace's /etc/hosts), secrets and volumes mapped to
/// files of the test.
@Suite("Deployment: compose.yaml", .timeLimit(.minutes(3)))
struct DeploymentTests {
    static let root = repositoryRoot

    @Test func composeFileIsValid() async throws {
        let compose = try await run(["docker-compose", "-f", Self.root.path + "/compose.yaml", "config", "-q"])
        #expect(compose.status == 0, "docker-compose config (installed by make test): \(compose.errors)")
        let withLoad = try await run(["docker-compose", "-f", Self.root.path + "/compose.yaml", "--profile", "load", "config", "--services"])
        #expect(
            withLoad.output.split(separator: "\n").sorted()
                == ["gateway", "hub-a", "hub-b", "hub-c", "load", "proxy", "relay", "spectator", "store", "store-standby"],
            "\(withLoad.output)")
    }

    /// The secrets compose mounts (issue 39: created 0600 by root, the
    /// services running as uid 10001 could not read them, and the load
    /// profile mounted the whole keys folder, the hubs' secret key and the
    /// store's password included). After scripts/compose-keys.sh, each file
    /// a touchsync service mounts is readable by uid 10001, the store's
    /// password also by PostgreSQL's uid, and none by another uid; the load
    /// profile mounts its own folder read-only, without the hubs' secret key
    /// or the store's password, and a load run against an external hub works
    /// from it (the topology test below runs it).
    @Test(.enabled(if: isRoot, "reading as other users needs root"))
    func composeSecretsAreReadableByTheServicesThatMountThemOnly() async throws {
        // Under /tmp itself, traversable by other uids (the tests' own folders are 0700).
        let base = "/tmp/touchsync-secrets-\(testRunTag)-\(Int.random(in: 1000...9999))"
        try FileManager.default.createDirectory(atPath: base, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o711])
        defer { try? FileManager.default.removeItem(atPath: base) }
        let keys = base + "/keys"
        let made = try await run(["env", "TOUCHSYNC=\(TouchSyncProcess.binary.path)", Self.root.path + "/scripts/compose-keys.sh", keys])
        try #require(made.status == 0, "scripts/compose-keys.sh: \(made.errors)")
        // compose bind-mounts each file itself, so the folder's own mode does not
        // matter there; here the other uids must pass through it to reach them.
        try FileManager.default.setAttributes([.posixPermissions: 0o711], ofItemAtPath: keys)
        func readable(_ path: String, by uid: Int) async throws -> Bool {
            try await run(["setpriv", "--reuid=\(uid)", "--regid=\(uid)", "--clear-groups", "cat", path]).status == 0
        }
        let mounts = try await composeMounts()
        let files = try #require(mounts.secrets as [String: String]?)
        for (service, secrets) in mounts.services {
            for secret in secrets {
                let file = try #require(files[secret], "\(service) mounts an undeclared secret \(secret)")
                let path = Self.root.path + "/" + file
                let mapped = keys + "/" + URL(fileURLWithPath: path).lastPathComponent
                let reader = service.hasPrefix("store") ? 999 : 10001  // PostgreSQL's image runs as its postgres user
                #expect(try await readable(mapped, by: reader), "\(service) (uid \(reader)) cannot read its secret \(secret)")
                #expect(try await !readable(mapped, by: 10002), "another uid reads \(secret)")
            }
        }
        #expect(mounts.services["store"] == ["store_password"] && mounts.services["store-standby"] == ["store_password"], "PostgreSQL gets its password only: \(mounts.services)")
        #expect(mounts.services["spectator"] ?? [] == [], "the spectator needs no secret")
        // The load profile: its own folder, read-only, with what a load run needs and nothing else.
        #expect(mounts.loadVolumes == ["./deploy/keys/load:/keys:ro"], "\(mounts.loadVolumes)")
        let load = try FileManager.default.contentsOfDirectory(atPath: keys + "/load")
        #expect(load.contains("hub.pub") && load.contains("load-watcher.key") && load.contains("load-0-19.key"), "\(load.sorted())")
        #expect(!load.contains("hub.key") && !load.contains("store.password") && !load.contains("gateway.key"), "\(load.sorted())")
        for file in load { #expect(try await readable(keys + "/load/" + file, by: 10001), "\(file)") }
        #expect(try await !readable(keys + "/load/load-0-0.key", by: 10002))
    }

    /// compose.yaml's services as it starts them, each in a namespace of its
    /// own on one bridge, reaching the others by their service names:
    /// PostgreSQL (Debian's, in place of the postgres image), three hubs on
    /// it, the relay given all three hubs' feeds, the spectator behind it,
    /// the web gateway with its own key (acts_for), and the load profile
    /// (shortened to 3 s) through the three hubs. The load converges with 0
    /// lost; a drawing on the demo board, sent to hub-a and followed to the
    /// hub that holds it, reaches the spectator through the relay with the
    /// holder's digest; every service's own health check passes (the
    /// spectator's and the load run's are off); the gateway serves its page.
    @Test(.enabled(if: isRoot, "network namespaces need root"))
    func composeTopologyRunsAsProcessesInNamespaces() async throws {
        let services = try await composeServices()
        let keys = try temporaryFolder("compose-keys")
        defer { try? FileManager.default.removeItem(atPath: keys) }
        let made = try await run(["env", "TOUCHSYNC=\(TouchSyncProcess.binary.path)", Self.root.path + "/scripts/compose-keys.sh", keys])
        try #require(made.status == 0, "scripts/compose-keys.sh: \(made.errors)")
        #expect(FileManager.default.fileExists(atPath: keys + "/store.password") && FileManager.default.fileExists(atPath: keys + "/gateway.key"))

        let network = try await ServiceNetwork.create(services: ["store", "hub-a", "hub-b", "hub-c", "relay", "spectator", "gateway", "load"])
        defer { network.remove() }
        // The store service: a PostgreSQL server in its namespace on port 5432, with compose.yaml's database.
        let store = try await PostgresServer(namespace: network.namespace("store"), host: network.address("store"), port: 5432)
        defer { store.stopNow() }
        let database = try await store.sql("CREATE DATABASE touchsync")
        try #require(database.status == 0, "\(database.errors)")
        let children = ChildProcesses()
        defer { children.killAll() }
        // What a container would see, mapped onto the test's files (a service's command, or another of its commands).
        func command(_ service: String, _ given: [String]? = nil) throws -> [String] {
            guard let arguments = given ?? services[service] else { throw TestFailure("compose.yaml has no service \(service)") }
            let secrets = [
                "hub_key": "hub.key", "hub_pub": "hub.pub", "access_list": "access.json", "health_key": "health.key", "relay_key": "relay.key",
                "gateway_key": "gateway.key", "store_password": "store.password",
            ]
            return arguments.map { argument in
                var mapped = argument
                for (secret, file) in secrets { mapped = mapped.replacingOccurrences(of: "/run/secrets/\(secret)", with: keys + "/" + file) }
                if mapped == "/keys" { mapped = keys + "/load" }  // compose mounts deploy/keys/load there
                return mapped
            }
        }
        for hub in ["hub-a", "hub-b", "hub-c"] {
            let (_, _, text) = try await children.startHub(try command(hub), namespace: network.namespace(hub))
            try #require(text.contains("authenticated: CURVE") && text.contains("as hub \(hub)"), "\(text)")
        }
        try await Task.sleep(for: .seconds(1))  // each hub sees the others live (renewals every 5/8 s)
        let (_, relayOutput) = try children.run(try command("relay"), limit: 150, namespace: network.namespace("relay"))
        var relayText = ""
        await readUntil(relayOutput, into: &relayText) { $0.contains("Ctrl-C stops it.") }
        let (_, spectatorOutput) = try children.run(try command("spectator"), limit: 150, namespace: network.namespace("spectator"))
        let (_, gatewayOutput) = try children.run(try command("gateway"), limit: 150, namespace: network.namespace("gateway"))
        var gatewayText = ""
        await readUntil(gatewayOutput, into: &gatewayText) { $0.contains("Ctrl-C stops it.") }
        #expect(gatewayText.contains("Ctrl-C stops it."), "\(gatewayText) \(gatewayOutput.errors)")

        // Each service's health check, as compose runs it inside its container (issue 39: the relay,
        // the gateway and the spectator inherited the image's, which asks a hub's port they do not serve).
        let checks = try await composeHealthChecks()
        #expect(checks["spectator"] == .some(nil) && checks["load"] == .some(nil), "a spectator and a load run have nothing to probe: \(checks)")
        for service in ["hub-a", "hub-b", "hub-c", "relay", "gateway"] {
            let test = try #require(checks[service] ?? nil, "\(service) has no health check of its own")
            #expect(test.first == "CMD")
            let arguments = try command(service, test.dropFirst().map { $0 == "touchsync" ? TouchSyncProcess.binary.path : $0 })
            var outcome = try await run(["ip", "netns", "exec", network.namespace(service)] + arguments)
            for _ in 0..<20 where outcome.status != 0 {  // compose retries within start_period too
                try await Task.sleep(for: .milliseconds(250))
                outcome = try await run(["ip", "netns", "exec", network.namespace(service)] + arguments)
            }
            #expect(outcome.status == 0, "\(service)'s health check: \(outcome.output) \(outcome.errors)")
        }

        // The load profile, shortened.
        var load = try command("load")
        if let index = load.firstIndex(of: "--duration") { load[index + 1] = "3" }
        let loadRun = try await run(["ip", "netns", "exec", network.namespace("load"), TouchSyncProcess.binary.path] + load, limit: 120)
        #expect(loadRun.status == 0, "\(loadRun.output)\n\(loadRun.errors)")
        #expect(loadRun.output.contains("lost / duplicated   0 / 0"), "\(loadRun.output)")
        // From its own folder (read-only in compose): nothing was made there, no hub key above all.
        #expect(!FileManager.default.fileExists(atPath: keys + "/load/hub.key"), "load made a hub key of its own in its folder")

        // alice draws on demo (from the spectator's host) through hub-a, which sends her to the holder;
        // the spectator behind the relay shows the holder's board.
        let hubs = ["--hub", "tcp://hub-a:5570,tcp://hub-b:5570,tcp://hub-c:5570", "--publish", "tcp://hub-a:5571", "--snapshot", "tcp://hub-a:5572",
                    "--key", keys + "/alice.key", "--hub-key", keys + "/hub.pub"]
        let draw = try await run(
            ["ip", "netns", "exec", network.namespace("spectator"), TouchSyncProcess.binary.path, "draw", "--board", "demo", "--fast"] + hubs)
        #expect(draw.status == 0, "\(draw.errors)")
        let atHub = try await run(
            ["ip", "netns", "exec", network.namespace("spectator"), TouchSyncProcess.binary.path, "spectate", "--board", "demo", "--duration", "2"] + hubs)
        let hubDigest = try #require(lastDigest(atHub.output), "\(atHub.output) \(atHub.errors)")
        var spectatorText = ""
        await readUntil(spectatorOutput, into: &spectatorText) { $0.contains(hubDigest) }
        #expect(spectatorText.contains(hubDigest), "the spectator behind the relay never showed the holder's digest \(hubDigest)")
        #expect(try await store.sql("SELECT hub FROM touchsync_leases WHERE board = 'demo'", database: "touchsync").output.contains("hub-"))

        // The gateway serves its page on the compose network.
        let page = try await run(
            ["ip", "netns", "exec", network.namespace("spectator"), "/usr/bin/python3", "-c",
             "import urllib.request; print(urllib.request.urlopen('http://gateway:8080/', timeout=10).status)"])
        #expect(page.output.trimmingCharacters(in: .whitespacesAndNewlines) == "200", "\(page.output) \(page.errors)")
    }

    /// The TLS recipe (issue 39): compose's "tls" profile runs Caddy with
    /// deploy/Caddyfile in front of the gateway. Here Debian's caddy runs
    /// that file in a namespace of its own ("proxy"), reaching "gateway" by
    /// its name as on the compose network; through it, over HTTPS with
    /// Caddy's local certificate (the default site, localhost), the page
    /// is served and a tab's WebSocket is upgraded and welcomed.
    @Test(.enabled(if: isRoot, "network namespaces need root"))
    func theTLSProxyRecipeServesThePageAndTabs() async throws {
        let network = try await ServiceNetwork.create(services: ["gateway", "proxy"])
        defer { network.remove() }
        let caddyHome = try temporaryFolder("caddy")
        defer { try? FileManager.default.removeItem(atPath: caddyHome) }
        let children = ChildProcesses()
        defer { children.killAll() }
        let ports = try TouchSyncProcess.freePorts(3)
        let hub = ports.map { "tcp://127.0.0.1:\($0)" }
        _ = try await children.startHub(
            ["hub", "--no-journal", "--ingest", hub[0], "--publish", hub[1], "--snapshot", hub[2]], namespace: network.namespace("gateway"))
        let (_, gatewayOutput) = try children.run(
            ["web", "--listen", "0.0.0.0:8080", "--hub", hub[0], "--publish", hub[1], "--snapshot", hub[2], "--insecure"],
            limit: 120, namespace: network.namespace("gateway"))
        var gatewayText = ""
        await readUntil(gatewayOutput, into: &gatewayText) { $0.contains("Ctrl-C stops it.") }
        try #require(gatewayText.contains("Ctrl-C stops it."), "\(gatewayText) \(gatewayOutput.errors)")

        let log = caddyHome + "/caddy.log"
        let logFile = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        let caddy = try Child.spawn(
            "/usr/bin/env",
            ["ip", "netns", "exec", network.namespace("proxy"), "env", "HOME=\(caddyHome)", "XDG_DATA_HOME=\(caddyHome)/data",
             "XDG_CONFIG_HOME=\(caddyHome)/config", "caddy", "run", "--adapter", "caddyfile", "--config", Self.root.path + "/deploy/Caddyfile"],
            output: logFile, errors: logFile)
        close(logFile)
        defer { kill(caddy.processIdentifier, SIGKILL) }
        // A client beside the proxy: the page over HTTPS, then a tab's upgrade and hello.
        let client = #"""
            import json, os, socket, ssl, sys, time, urllib.request
            context = ssl._create_unverified_context()  # Caddy's local CA, not trusted here
            for attempt in range(100):
                try:
                    page = urllib.request.urlopen('https://localhost/', context=context, timeout=5)
                    break
                except Exception as error:
                    last = error; time.sleep(0.2)
            else:
                sys.exit('no page through the proxy: %s' % last)
            print('page', page.status, 'html' if b'<html' in page.read().lower() else 'no html')
            raw = socket.create_connection(('localhost', 443), timeout=10)
            tls = context.wrap_socket(raw, server_hostname='localhost')
            tls.sendall(b'GET /ws HTTP/1.1\r\nHost: localhost\r\nOrigin: https://localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n'
                        b'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n')
            head = b''
            while b'\r\n\r\n' not in head:
                head += tls.recv(1)
            print('upgrade', head.split(b'\r\n')[0].decode())
            hello = json.dumps({'t': 'hello', 'board': 'tls', 'resume': None, 'name': 'tls'}).encode()
            mask = os.urandom(4)
            tls.sendall(bytes([0x81, 0x80 | len(hello)]) + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(hello)))
            first = tls.recv(2)
            length = first[1] & 0x7F
            if length == 126: length = int.from_bytes(tls.recv(2), 'big')
            body = b''
            while len(body) < length: body += tls.recv(length - len(body))
            print('first', json.loads(body).get('t'))
            """#
        let outcome = try await run(["ip", "netns", "exec", network.namespace("proxy"), "/usr/bin/python3", "-c", client], limit: 90)
        let caddyLog = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        #expect(outcome.status == 0, "\(outcome.output) \(outcome.errors) caddy: \(caddyLog.suffix(2000))")
        #expect(outcome.output.contains("page 200 html"), "\(outcome.output)")
        #expect(outcome.output.contains("upgrade HTTP/1.1 101"), "\(outcome.output)")
        #expect(outcome.output.contains("first welcome"), "\(outcome.output) \(outcome.errors)")
    }

    /// Three hubs, each in its own namespace, hold the boards a cluster file
    /// gives them (rendezvous hashing; one of them started with no endpoints
    /// serves the file's, issue 39); a load of 30 boards spread over them
    /// converges on every board; a client with a stale cluster file (a hub
    /// missing) is answered WRONG_HUB naming the right hub and its endpoints,
    /// and follows it there.
    @Test(.enabled(if: isRoot, "network namespaces need root"))
    func boardsShardedOverThreeHubsConverge() async throws {
        let network = try await ServiceNetwork.create(services: ["hub-a", "hub-b", "hub-c", "client"])
        defer { network.remove() }
        let folder = try temporaryFolder("cluster")
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let hubs = ["hub-a", "hub-b", "hub-c"].map { name in
            ClusterMap.Hub(name: name, ingest: "tcp://\(name):5570", publish: "tcp://\(name):5571", snapshot: "tcp://\(name):5572")
        }
        let map = try ClusterMap(hubs: hubs)
        let stale = try ClusterMap(hubs: Array(hubs.prefix(2)))
        for (file, cluster) in [("cluster.json", map), ("stale.json", stale)] {
            try JSONEncoder().encode(cluster).write(to: URL(fileURLWithPath: folder + "/" + file))
        }
        let boards = (0..<30).map { "load-1-\($0)" }
        #expect(Set(boards.map { map.hub(for: $0).name }).count == 3, "30 boards should land on all three hubs")
        // Adding a hub moves only the boards it takes.
        #expect(boards.allSatisfy { board in map.hub(for: board).name == "hub-c" || map.hub(for: board) == stale.hub(for: board) })

        let children = ChildProcesses()
        defer { children.killAll() }
        for hub in hubs {
            // hub-c is given no endpoints: it serves those the cluster file lists for it.
            let binds = hub.name == "hub-c" ? [] : ["--ingest", "tcp://*:5570", "--publish", "tcp://*:5571", "--snapshot", "tcp://*:5572"]
            let (_, output) = try children.run(
                ["hub", "--no-journal", "--insecure", "--cluster", folder + "/cluster.json", "--name", hub.name] + binds,
                limit: 120, namespace: network.namespace(hub.name))
            var text = ""
            await readUntil(output, into: &text) { $0.contains("Ctrl-C stops it.") }
            #expect(text.contains("cluster     hub \(hub.name) of 3"), "\(text)")
            if binds.isEmpty { #expect(text.contains(":5570") && !text.contains("tcp://127.0.0.1:5570"), "hub-c's own address: \(text)") }
        }
        let client = network.namespace("client")
        let load = try await run(
            ["ip", "netns", "exec", client, TouchSyncProcess.binary.path, "load", "--cluster", folder + "/cluster.json",
             "--boards", "30", "--users", "30", "--fingers", "1", "--duration", "2"], limit: 120)
        #expect(load.status == 0, "\(load.output)\n\(load.errors)")
        #expect(load.output.contains("lost / duplicated   0 / 0") && load.output.contains("converged           yes"), "\(load.output)")

        // A board hub-c holds, drawn with a stale file that does not know hub-c.
        let moved = try #require(boards.first { map.hub(for: $0).name == "hub-c" })
        let redirected = try await run(
            ["ip", "netns", "exec", client, TouchSyncProcess.binary.path, "draw", "--board", moved, "--fast", "--cluster", folder + "/stale.json",
             "--log-level", "notice"])
        #expect(redirected.status == 0, "\(redirected.errors)")
        #expect(redirected.errors.contains("another hub serves the board: following it") && redirected.errors.contains("tcp://hub-c:5570"), "\(redirected.errors)")
        let picture = folder + "/moved.svg"
        let drawn = try await run(
            ["ip", "netns", "exec", client, TouchSyncProcess.binary.path, "render", "--board", moved,
             "--publish", "tcp://hub-c:5571", "--snapshot", "tcp://hub-c:5572", "-o", picture])
        #expect(drawn.status == 0, "\(drawn.errors)")
        #expect((try? String(contentsOfFile: picture, encoding: .utf8))?.contains("<path") == true)
        let shown = try await run([TouchSyncProcess.binary.path, "cluster", "show", "--cluster", folder + "/cluster.json", "--board", moved])
        #expect(shown.output.contains("\(moved): hub hub-c"), "\(shown.output)")
    }

    /// `hub --metrics`: Prometheus text over HTTP whose counters move with
    /// the load (frames, samples, batches) and count refused handshakes.
    @Test func metricsEndpointCountsWhatTheHubDoes() async throws {
        let ports = try TouchSyncProcess.freePorts(4)
        let children = ChildProcesses()
        defer { children.killAll() }
        let endpoints = ["--ingest", "tcp://127.0.0.1:\(ports[0])", "--publish", "tcp://127.0.0.1:\(ports[1])", "--snapshot", "tcp://127.0.0.1:\(ports[2])"]
        let (_, _, banner) = try await children.startHub(["hub", "--no-journal", "--metrics", "127.0.0.1:\(ports[3])"] + endpoints)
        #expect(banner.contains("metrics     http://127.0.0.1:\(ports[3])/metrics"), "\(banner)")
        func scrape() throws -> [String: Double] {
            let text = try httpGet(port: UInt16(ports[3]), path: "/metrics")
            var values: [String: Double] = [:]
            for line in text.split(separator: "\n") where !line.hasPrefix("#") {
                let parts = line.split(separator: " ")
                if parts.count == 2, let value = Double(parts[1]) { values[String(parts[0])] = value }
            }
            return values
        }
        let before = try scrape()
        #expect(before["touchsync_hub_frames_total"] == 0, "\(before)")
        let draw = try await touchsync(["draw", "--board", "m", "--fast", "--hub", endpoints[1], "--publish", endpoints[3], "--snapshot", endpoints[5]])
        #expect(draw.status == 0, "\(draw.errors)")
        let after = try scrape()
        #expect((after["touchsync_hub_frames_total"] ?? 0) > 10, "\(after)")
        #expect((after["touchsync_hub_samples_total"] ?? 0) > 100)
        #expect((after["touchsync_hub_batches_total"] ?? 0) > 0)
        #expect(after["touchsync_hub_boards"] == 1)
        // Board names are not labels unless asked for (--metrics-board-labels); the sum is there.
        let text = try httpGet(port: UInt16(ports[3]), path: "/metrics")
        #expect(!text.contains("board=") && text.contains("touchsync_hub_live_touches_all_boards"), "\(text)")
        // Only /metrics answers.
        #expect(throws: (any Error).self) { try httpGet(port: UInt16(ports[3]), path: "/boards") }

        // Idle connections (a slowloris, 1,087 of them used every descriptor) neither
        // keep a scraper out nor stay: 100 held open, a scrape still answers, and
        // an idle one is closed after the 5 s request time-out.
        let idle = try (0..<100).map { _ in try connectedSocket(port: UInt16(ports[3])) }
        defer { for descriptor in idle { close(descriptor) } }
        #expect((try scrape()["touchsync_hub_frames_total"] ?? 0) > 10)
        let last = try #require(idle.last)
        var timeout = timeval(tv_sec: 15, tv_usec: 0)
        setsockopt(last, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var byte: UInt8 = 0
        // 0 is the end of stream: the server closed it (the 15 s receive time-out would give -1).
        #expect(recv(last, &byte, 1, 0) == 0, "an idle connection was not closed (end of stream)")
    }

    /// Slowloris on the gateway (8,000 half-sent requests held it for 70 s):
    /// 60 connections past its 50 each send a request head a header at a time,
    /// a line a second, never finishing. Each is closed once the header
    /// time-out (3 s here) passes, though it never went idle, and an honest
    /// request waiting behind them is answered.
    @Test func halfSentRequestsAreClosedAndHonestOnesServed() async throws {
        let children = ChildProcesses()
        defer { children.killAll() }
        let hub = try await children.startPlainHub(ports: try TouchSyncProcess.freePorts(3))
        // Port 0: a port picked in advance may be taken by a parallel test's process before the gateway binds it.
        let (_, output) = try children.run(
            ["web", "--listen", "127.0.0.1:0", "--hub", hub[0], "--publish", hub[1], "--snapshot", hub[2],
             "--max-connections", "50", "--header-timeout", "3"])
        var text = ""
        await readUntil(output, into: &text) { $0.contains("Ctrl-C stops it.") }
        let url = try #require(text.range(of: #"http://127\.0\.0\.1:[0-9]+"#, options: .regularExpression), "the gateway did not start: \(text)")
        let port = try #require(Int(text[url].split(separator: ":").last ?? ""))
        let slow = try (0..<60).map { _ in try connectedSocket(port: UInt16(port)) }
        defer { for descriptor in slow { close(descriptor) } }
        @Sendable func sendText(_ descriptor: Int32, _ text: String) -> Bool {
            Array(text.utf8).withUnsafeBytes { send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) } > 0
        }
        for descriptor in slow { _ = sendText(descriptor, "GET / HTTP/1.1\r\nHost: localhost\r\n") }
        // A header line a second on each, from a thread of its own, until told to stop.
        let stop = Mutex(false)
        let dripper = Thread {
            var line = 0
            while !stop.withLock({ $0 }) {
                line += 1
                for descriptor in slow { _ = sendText(descriptor, "X-Line-\(line): 1\r\n") }
                usleep(1_000_000)
            }
        }
        dripper.start()
        defer { stop.withLock { $0 = true } }

        // The honest request waits behind them (the 50 places are taken), and is answered.
        let started = ContinuousClock.now
        let honest = try await Task.detached { try httpGet(port: UInt16(port), path: "/", close: true) }.value
        #expect(honest.contains("<html") || honest.contains("<!doctype") || honest.contains("<!DOCTYPE"), "\(honest.prefix(200))")
        print("slowloris: an honest request behind 60 half-sent ones answered after \(ContinuousClock.now - started)")
        // Every slow connection was closed by the gateway (end of stream), though it kept sending.
        var closed = 0
        for descriptor in slow {
            var timeout = timeval(tv_sec: 15, tv_usec: 0)
            setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            var buffer = [UInt8](repeating: 0, count: 4096)
            var count = recv(descriptor, &buffer, buffer.count, 0)
            while count > 0 { count = recv(descriptor, &buffer, buffer.count, 0) }  // a 408 or the like first, if any
            if count == 0 || errno == ECONNRESET { closed += 1 }
        }
        #expect(closed == slow.count, "\(slow.count - closed) half-sent connections are still open")
    }

    /// Metrics have no authentication: a non-loopback --metrics needs --public-metrics.
    @Test func metricsStayOnLoopbackUnlessToldOtherwise() async throws {
        let open = try await touchsync(["hub", "--no-journal", "--metrics", "0.0.0.0:9570"])
        #expect(open.status == 64 && open.errors.contains("--public-metrics"), "\(open.errors)")
    }

    /// The services' commands, read from compose.yaml (Debian's python3-yaml comes with docker-compose).
    func composeServices() async throws -> [String: [String]] {
        let script = "import json,sys,yaml; d=yaml.safe_load(open(sys.argv[1])); print(json.dumps({k: v.get('command', []) for k, v in d['services'].items()}))"
        let read = try await run(["/usr/bin/python3", "-c", script, Self.root.path + "/compose.yaml"])
        guard read.status == 0, let services = try JSONSerialization.jsonObject(with: Data(read.output.utf8)) as? [String: [String]] else {
            throw TestFailure("cannot read compose.yaml's services: \(read.errors)")
        }
        return services
    }

    /// Each service's secrets, the secrets' files, and the load profile's volumes.
    func composeMounts() async throws -> (services: [String: [String]], secrets: [String: String], loadVolumes: [String]) {
        let script = """
            import json,sys,yaml; d=yaml.safe_load(open(sys.argv[1]))
            print(json.dumps({'services': {k: [x if isinstance(x, str) else x['source'] for x in v.get('secrets', [])] for k, v in d['services'].items()},
                              'secrets': {k: v['file'] for k, v in d['secrets'].items()}, 'load': d['services']['load'].get('volumes', [])}))
            """
        let read = try await run(["/usr/bin/python3", "-c", script, Self.root.path + "/compose.yaml"])
        guard read.status == 0, let all = try JSONSerialization.jsonObject(with: Data(read.output.utf8)) as? [String: Any],
            let services = all["services"] as? [String: [String]], let secrets = all["secrets"] as? [String: String],
            let load = all["load"] as? [String]
        else { throw TestFailure("cannot read compose.yaml's secrets: \(read.errors)") }
        return (services, secrets, load)
    }

    /// Each service's health check `test` (the hubs' through the x-hub anchor), nil where it is disabled or absent.
    func composeHealthChecks() async throws -> [String: [String]?] {
        let script = """
            import json,sys,yaml; d=yaml.safe_load(open(sys.argv[1]))
            print(json.dumps({k: (None if (v.get('healthcheck') or {}).get('disable') else (v.get('healthcheck') or {}).get('test')) for k, v in d['services'].items()}))
            """
        let read = try await run(["/usr/bin/python3", "-c", script, Self.root.path + "/compose.yaml"])
        guard read.status == 0, let checks = try JSONSerialization.jsonObject(with: Data(read.output.utf8)) as? [String: Any] else {
            throw TestFailure("cannot read compose.yaml's health checks: \(read.errors)")
        }
        return checks.mapValues { $0 as? [String] }
    }

    func lastDigest(_ text: String) -> String? { spectatedDigest(text) }

    /// A system command, to its end.
    func run(_ arguments: [String], limit: Double = 60) async throws -> Outcome {
        try await runToEnd("/usr/bin/env", arguments, limit: limit)
    }
}

/// Hosts named like compose services, one namespace each, on one bridge
/// (in a namespace of its own), each resolving the others' names through
/// its own /etc/hosts (`ip netns exec` mounts /etc/netns/NAME/hosts). Root only.
final class ServiceNetwork {
    private let tag = "\(Int.random(in: 1000...9999))"
    private let names: [String]
    private let subnet = Int.random(in: 100...199)
    private var made: [String] = []

    /// Creates the network on a thread of its own: its `ip` commands wait
    /// for their children, which must not hold the cooperative pool.
    static func create(services: [String]) async throws -> ServiceNetwork {
        try await offThePool { try ServiceNetwork(services: services) }
    }

    private init(services: [String]) throws {
        names = services
        let bridge = "tsw-\(testRunTag)-\(tag)"
        var hosts = "127.0.0.1 localhost\n"
        for (index, service) in services.enumerated() { hosts += "10.79.\(subnet).\(index + 1) \(service)\n" }
        var steps: [[String]] = [["ip", "netns", "add", bridge]]
        steps.append(["ip", "-n", bridge, "link", "add", "br0", "type", "bridge"])
        steps.append(["ip", "-n", bridge, "link", "set", "br0", "up"])
        for (index, service) in services.enumerated() {
            let namespace = self.namespace(service)
            let inner = "e\(index)\(tag)"
            let outer = "p\(index)\(tag)"
            steps += [
                ["ip", "netns", "add", namespace],
                ["ip", "link", "add", inner, "type", "veth", "peer", "name", outer],
                ["ip", "link", "set", inner, "netns", namespace], ["ip", "link", "set", outer, "netns", bridge],
                ["ip", "-n", bridge, "link", "set", outer, "master", "br0"], ["ip", "-n", bridge, "link", "set", outer, "up"],
                ["ip", "-n", namespace, "addr", "add", "10.79.\(subnet).\(index + 1)/24", "dev", inner],
                ["ip", "-n", namespace, "link", "set", inner, "up"], ["ip", "-n", namespace, "link", "set", "lo", "up"],
            ]
        }
        made.append(bridge)
        for service in services {
            let folder = "/etc/netns/\(namespace(service))"
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            try hosts.write(toFile: folder + "/hosts", atomically: true, encoding: .utf8)
            made.append(namespace(service))
        }
        for step in steps {
            guard try touchsyncShell(step) == 0 else {
                remove()
                throw TestFailure("network setup failed at: \(step.joined(separator: " "))")
            }
        }
    }

    func namespace(_ service: String) -> String { "tsc-\(service.prefix(6))-\(testRunTag)-\(tag)" }

    /// The address `service` has on the bridge.
    func address(_ service: String) -> String { "10.79.\(subnet).\(names.firstIndex(of: service)! + 1)" }

    func remove() {
        for namespace in made {
            _ = try? touchsyncShell(["ip", "netns", "del", namespace])
            try? FileManager.default.removeItem(atPath: "/etc/netns/\(namespace)")
        }
        made.removeAll()
    }

    deinit { remove() }
}

/// `touchsync draw --undo N --redo M` through a real hub.
@Suite("Draw: undo and redo", .timeLimit(.minutes(3)))
struct DrawUndoTests {
    @Test func drawUndoesAndRedoes() async throws {
        let children = ChildProcesses()
        defer { children.killAll() }
        let endpoints = try await children.startPlainHub(ports: try TouchSyncProcess.freePorts(3))
        let draw = try await touchsync(
            ["draw", "--board", "u", "--fast", "--undo", "2", "--redo", "1", "--hub", endpoints[0], "--publish", endpoints[1], "--snapshot", endpoints[2]])
        #expect(draw.status == 0 && draw.output.contains("2 undone, 1 redone"), "\(draw.output) \(draw.errors)")
        let reply = try #require(try await snapshotReply(endpoint: endpoints[2], board: "u"))
        let accepted = reply.chunk.strokes.filter { $0.acceptedPosition > 0 }
        #expect(accepted.count == 2, "3 strokes drawn, 2 undone, 1 redone: \(accepted.map(\.strokeID))")
        #expect(accepted.map(\.acceptedPosition) == [1, 2], "the redone stroke is back in its place")
        let refused = try await touchsync(["draw", "--board", "u", "--redo", "2", "--undo", "1", "--hub", endpoints[0]])
        #expect(refused.status != 0 && refused.errors.contains("--redo at most --undo"))
    }
}

/// The image's build stage, in a suite of its own: resolving the packages
/// into an empty folder took over 3 minutes (the deployment suite's limit)
/// on a loaded machine, and the resolve step's own limit is 5.
@Suite("Deployment: the image's build stage", .timeLimit(.minutes(10)))
struct ImageBuildTests {
    /// The image's build stage from exactly what the Dockerfile copies (issue
    /// 39: it copied Package.swift, Sources and proto, and the package did not
    /// load without Tests/): its COPY steps into an empty folder, its `swift
    /// package resolve` as it runs it, and, in place of its release build
    /// (compiling is the image's: no container engine here), `swift package
    /// describe`, which loads the manifest and every target's folder, with the
    /// product the build names among the products.
    @Test func theImageBuildStageLoadsFromWhatTheDockerfileCopies() async throws {
        let text = try String(contentsOf: repositoryRoot.appendingPathComponent("Dockerfile"), encoding: .utf8)
        let lines = text.replacingOccurrences(of: "\\\n", with: " ").split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
        let stage = lines.drop { !$0.hasPrefix("FROM ") }.dropFirst().prefix { !$0.hasPrefix("FROM ") }
        let folder = try temporaryFolder("image-build")
        defer { try? FileManager.default.removeItem(atPath: folder) }
        var copied: [String] = [], resolved = false, described = false
        for line in stage {
            let words = line.split(separator: " ").map(String.init)
            if words.first == "COPY", !line.contains("--from") {
                for source in words.dropFirst().dropLast() {
                    try FileManager.default.copyItem(atPath: repositoryRoot.path + "/" + source, toPath: folder + "/" + source)
                    copied.append(source)
                }
            } else if line.hasPrefix("RUN swift package resolve") {
                let resolve = try await run(["swift", "package", "--package-path", folder, "resolve"], limit: 300)
                #expect(resolve.status == 0, "\(resolve.errors)")
                resolved = true
            } else if line.hasPrefix("RUN swift build") {
                let product = try #require(words.firstIndex(of: "--product").map { words[$0 + 1] })
                let describe = try await run(["swift", "package", "--package-path", folder, "describe", "--type", "json"], limit: 120)
                #expect(describe.status == 0, "the package does not load from what the image copies: \(describe.errors)")
                let description = try JSONSerialization.jsonObject(with: Data(describe.output.utf8)) as? [String: Any]
                let products = (description?["products"] as? [[String: Any]] ?? []).compactMap { $0["name"] as? String }
                #expect(products.contains(product), "\(product) among \(products)")
                described = true
            }
        }
        #expect(copied.contains("Package.swift") && copied.contains("Sources") && !copied.contains("Tests"), "\(copied)")
        #expect(resolved && described, "the build stage resolves, then builds")
    }

    /// A system command, to its end.
    func run(_ arguments: [String], limit: Double = 60) async throws -> Outcome {
        try await runToEnd("/usr/bin/env", arguments, limit: limit)
    }
}
