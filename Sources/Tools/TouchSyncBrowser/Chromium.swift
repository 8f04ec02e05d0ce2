import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A headless Chromium driven over the DevTools protocol, for the browser
/// tests and `touchsync bench --browser`. It talks through
/// `--remote-debugging-pipe` (requests on the browser's descriptor 3,
/// replies and events on 4, each JSON message ended by a NUL byte), so no
/// port is opened and nothing has to be discovered.
public final class Chromium: Sendable {
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
        init(_ description: String) { self.description = description }
    }

    private let processIdentifier: pid_t
    private let toBrowser: Int32
    private let fromBrowser: Int32
    private let profile: String
    private struct State {
        var nextID = 1
        var waiting: [Int: CheckedContinuation<Data, any Error>] = [:]
        var console: [String] = []
        var closed = false
    }
    private let state = Mutex(State())

    /// The Chromium executable: $TOUCHSYNC_CHROMIUM, else Debian's.
    public static var executable: String? {
        let candidates = [ProcessInfo.processInfo.environment["TOUCHSYNC_CHROMIUM"], "/usr/bin/chromium", "/usr/bin/chromium-browser"]
        return candidates.compactMap { $0 }.first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// Starts a headless Chromium with a fresh profile. `spawning` runs the
    /// spawn itself, for a caller that serialises its spawns with its own
    /// pipe creation (so no child inherits another's descriptors).
    public static func launch(
        windowSize: (width: Int, height: Int) = (1000, 700), spawning: (() -> Void) -> Void = { $0() }
    ) throws -> Chromium {
        guard let executable else { throw Failure("no Chromium: install Debian's chromium (make test-deps does) or set TOUCHSYNC_CHROMIUM") }
        let profile = FileManager.default.temporaryDirectory.appendingPathComponent("touchsync-chromium-\(UUID().uuidString)").path
        // Socket pairs made close-on-exec atomically: no other child inherits them.
        var requests: [Int32] = [0, 0]
        var replies: [Int32] = [0, 0]
        let type = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
        guard socketpair(AF_UNIX, type, 0, &requests) == 0, socketpair(AF_UNIX, type, 0, &replies) == 0 else {
            throw Failure("socketpair: \(String(cString: strerror(errno)))")
        }
        let null = Glibc.open("/dev/null", O_RDWR | O_CLOEXEC)
        defer { Glibc.close(null) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, null, 0)
        posix_spawn_file_actions_adddup2(&actions, null, 1)
        posix_spawn_file_actions_adddup2(&actions, null, 2)
        posix_spawn_file_actions_adddup2(&actions, requests[1], 3)
        posix_spawn_file_actions_adddup2(&actions, replies[1], 4)
        let arguments = [
            executable, "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe", "--no-first-run",
            "--no-default-browser-check", "--disable-extensions", "--disable-background-networking", "--disable-sync",
            "--disable-renderer-backgrounding", "--disable-background-timer-throttling", "--disable-backgrounding-occluded-windows",
            "--mute-audio", "--user-data-dir=\(profile)", "--window-size=\(windowSize.width),\(windowSize.height)", "about:blank",
        ]
        let argv = arguments.map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        var pid: pid_t = 0
        var result: Int32 = 0
        spawning {
            result = argv.withUnsafeBufferPointer { buffer in
                posix_spawn(&pid, executable, &actions, nil, UnsafeMutablePointer(mutating: buffer.baseAddress!), environ)
            }
        }
        Glibc.close(requests[1])
        Glibc.close(replies[1])
        guard result == 0 else {
            Glibc.close(requests[0])
            Glibc.close(replies[0])
            throw Failure("cannot start \(executable): \(String(cString: strerror(result)))")
        }
        let browser = Chromium(processIdentifier: pid, toBrowser: requests[0], fromBrowser: replies[0], profile: profile)
        browser.startReading()
        return browser
    }

    private init(processIdentifier: pid_t, toBrowser: Int32, fromBrowser: Int32, profile: String) {
        self.processIdentifier = processIdentifier
        self.toBrowser = toBrowser
        self.fromBrowser = fromBrowser
        self.profile = profile
    }

    /// Console messages and uncaught exceptions of every page, as they came.
    public var console: [String] { state.withLock { $0.console } }

    /// Sends a DevTools command and waits for its result (the reply's "result" object as JSON).
    @discardableResult
    public func send(_ method: String, _ parameters: [String: any Sendable] = [:], session: String? = nil, timeout: Duration = .seconds(30))
        async throws -> [String: Any]
    {
        var message: [String: Any] = ["method": method, "params": parameters]
        if let session { message["sessionId"] = session }
        let id = state.withLock { state in
            defer { state.nextID += 1 }
            return state.nextID
        }
        message["id"] = id
        var encoded = try JSONSerialization.data(withJSONObject: message)
        encoded.append(0)
        let bytes = encoded
        let reply: Data = try await withThrowingTaskGroup(of: Data.self) { group in
            group.addTask {
                try await withCheckedThrowingContinuation { continuation in
                    let closed = self.state.withLock { state in
                        if state.closed { return true }
                        state.waiting[id] = continuation
                        return false
                    }
                    if closed { continuation.resume(throwing: Failure("the browser has exited")); return }
                    let written = bytes.withUnsafeBytes { buffer in
                        var offset = 0
                        while offset < buffer.count {
                            let count = write(self.toBrowser, buffer.baseAddress! + offset, buffer.count - offset)
                            if count < 0 { if errno == EINTR { continue } else { return false } }
                            offset += count
                        }
                        return true
                    }
                    if !written, let waiter = self.state.withLock({ $0.waiting.removeValue(forKey: id) }) {
                        waiter.resume(throwing: Failure("cannot write to the browser: \(String(cString: strerror(errno)))"))
                    }
                }
            }
            group.addTask {
                try await Task.sleep(for: timeout)
                throw Failure("\(method) got no reply within \(timeout)")
            }
            defer { group.cancelAll() }
            do {
                let first = try await group.next()!
                return first
            } catch {
                if let waiter = self.state.withLock({ $0.waiting.removeValue(forKey: id) }) { waiter.resume(throwing: error) }
                _ = try? await group.next()
                throw error
            }
        }
        let object = try JSONSerialization.jsonObject(with: reply) as? [String: Any] ?? [:]
        if let error = object["error"] as? [String: Any] {
            throw Failure("\(method): \(error["message"] ?? error)")
        }
        return object["result"] as? [String: Any] ?? [:]
    }

    /// Opens a tab at `url`, attached and with touch input enabled: a desktop
    /// window by default, or a phone (`mobile`, a viewport meta honoured) at
    /// `deviceScaleFactor` device pixels per CSS pixel.
    /// `person`: a browser context from `newPerson()` (its own storage and
    /// cookies, as another person's browser), or nil for the default one.
    public func openPage(
        _ url: String, width: Int = 1000, height: Int = 700, deviceScaleFactor: Double = 1, mobile: Bool = false, person: String? = nil
    ) async throws -> BrowserPage {
        var parameters: [String: any Sendable] = ["url": "about:blank", "newWindow": true, "width": width, "height": height]
        if let person { parameters["browserContextId"] = person }
        let target = try await send("Target.createTarget", parameters)
        guard let targetID = target["targetId"] as? String else { throw Failure("no target id") }
        let attached = try await send("Target.attachToTarget", ["targetId": targetID, "flatten": true])
        guard let session = attached["sessionId"] as? String else { throw Failure("no session id") }
        let page = BrowserPage(browser: self, targetID: targetID, session: session)
        try await page.send("Runtime.enable")
        try await page.send("Page.enable")
        try await page.resize(width: width, height: height, deviceScaleFactor: deviceScaleFactor, mobile: mobile)
        try await page.send("Emulation.setTouchEmulationEnabled", ["enabled": true, "maxTouchPoints": 10])
        try await page.send("Page.navigate", ["url": url])
        return page
    }

    /// A new browser context: pages opened in it share its storage and no one else's (another person).
    public func newPerson() async throws -> String {
        let created = try await send("Target.createBrowserContext")
        guard let context = created["browserContextId"] as? String else { throw Failure("no browser context id") }
        return context
    }

    /// Ends the browser and removes its profile.
    public func shutDown() {
        let waiting = state.withLock { state in
            state.closed = true
            defer { state.waiting.removeAll() }
            return Array(state.waiting.values)
        }
        for waiter in waiting { waiter.resume(throwing: Failure("the browser was closed")) }
        kill(processIdentifier, SIGKILL)
        var status: Int32 = 0
        waitpid(processIdentifier, &status, 0)
        Glibc.close(toBrowser)
        try? FileManager.default.removeItem(atPath: profile)
    }

    private func startReading() {
        let descriptor = fromBrowser
        Thread.detachNewThread { [self] in
            var pending = Data()
            var buffer = [UInt8](repeating: 0, count: 1 << 16)
            while true {
                let count = read(descriptor, &buffer, buffer.count)
                if count < 0 && errno == EINTR { continue }
                if count <= 0 { break }
                pending.append(contentsOf: buffer[0..<count])
                while let end = pending.firstIndex(of: 0) {
                    let message = pending[pending.startIndex..<end]
                    pending = Data(pending[(end + 1)...])
                    dispatch(Data(message))
                }
            }
            Glibc.close(descriptor)
            let waiting = state.withLock { state in
                state.closed = true
                defer { state.waiting.removeAll() }
                return Array(state.waiting.values)
            }
            for waiter in waiting { waiter.resume(throwing: Failure("the browser has exited")) }
        }
    }

    private func dispatch(_ message: Data) {
        guard let object = try? JSONSerialization.jsonObject(with: message) as? [String: Any] else { return }
        if let id = object["id"] as? Int {
            state.withLock { $0.waiting.removeValue(forKey: id) }?.resume(returning: message)
            return
        }
        guard let method = object["method"] as? String, let parameters = object["params"] as? [String: Any] else { return }
        var line: String? = nil
        if method == "Runtime.consoleAPICalled" {
            let arguments = (parameters["args"] as? [[String: Any]] ?? []).map { "\($0["value"] ?? $0["description"] ?? "?")" }
            line = "console.\(parameters["type"] ?? "log"): \(arguments.joined(separator: " "))"
        } else if method == "Runtime.exceptionThrown" {
            let details = parameters["exceptionDetails"] as? [String: Any]
            let exception = details?["exception"] as? [String: Any]
            line = "exception: \(exception?["description"] ?? details?["text"] ?? "?")"
        }
        if let line {
            state.withLock { state in
                state.console.append(line)
                if state.console.count > 500 { state.console.removeFirst(250) }
            }
        }
    }
}

/// One tab of a `Chromium`.
public struct BrowserPage: Sendable {
    public let browser: Chromium
    public let targetID: String
    public let session: String

    @discardableResult
    public func send(_ method: String, _ parameters: [String: any Sendable] = [:]) async throws -> [String: Any] {
        try await browser.send(method, parameters, session: session)
    }

    /// Evaluates `expression` (awaiting a promise) and returns its value as JSON-compatible data.
    public func evaluate(_ expression: String) async throws -> Any? {
        let result = try await send("Runtime.evaluate", ["expression": expression, "returnByValue": true, "awaitPromise": true])
        if let details = result["exceptionDetails"] as? [String: Any] {
            let exception = details["exception"] as? [String: Any]
            throw Chromium.Failure("\(expression.prefix(80))…: \(exception?["description"] ?? details["text"] ?? "exception")")
        }
        return (result["result"] as? [String: Any])?["value"]
    }

    /// Evaluates `expression` until it is true, or fails after `timeout`
    /// (times `TOUCHSYNC_TEST_SLOWNESS` when the test run says the machine is
    /// busy). 30 s by default: a page opened while a whole test run shares two
    /// cores once took longer than 15 s to be refused its board.
    public func waitFor(_ expression: String, timeout: Duration = .seconds(30)) async throws {
        let timeout = timeout * Self.slowness
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if (try? await evaluate(expression)) as? Bool == true { return }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw Chromium.Failure("not true within \(timeout): \(expression)")
    }

    /// A busy machine's factor for waits (`scripts/run-tests.sh` measures it; 1 otherwise).
    static let slowness: Double = {
        guard let text = ProcessInfo.processInfo.environment["TOUCHSYNC_TEST_SLOWNESS"], let value = Double(text), value.isFinite else { return 1 }
        return min(8, max(1, value))
    }()

    /// One touch event: `type` touchStart, touchMove, touchEnd or touchCancel; points (x, y, id).
    public func touch(_ type: String, _ points: [(x: Double, y: Double, id: Int)]) async throws {
        try await send(
            "Input.dispatchTouchEvent",
            [
                "type": type,
                "touchPoints": points.map { ["x": $0.x, "y": $0.y, "id": $0.id, "radiusX": 4, "radiusY": 4, "force": 0.5] as [String: any Sendable] },
            ])
    }

    /// One mouse or pen event: `type` mousePressed, mouseMoved or mouseReleased.
    /// `modifiers`: DevTools' bits, Alt 1, Ctrl 2, Meta 4, Shift 8.
    public func pointer(
        _ type: String, x: Double, y: Double, pointerType: String = "mouse", force: Double? = nil, tiltX: Double? = nil, tiltY: Double? = nil,
        modifiers: Int = 0
    ) async throws {
        var parameters: [String: any Sendable] = ["type": type, "x": x, "y": y, "pointerType": pointerType, "button": "left"]
        if modifiers != 0 { parameters["modifiers"] = modifiers }
        parameters["buttons"] = type == "mouseReleased" ? 0 : 1
        if type != "mouseMoved" { parameters["clickCount"] = 1 }
        if let force { parameters["force"] = force }
        if let tiltX { parameters["tiltX"] = tiltX }
        if let tiltY { parameters["tiltY"] = tiltY }
        try await send("Input.dispatchMouseEvent", parameters)
    }

    /// The mouse moved to (x, y) with no button down (hovering).
    public func hover(x: Double, y: Double) async throws {
        _ = try await send("Input.dispatchMouseEvent", ["type": "mouseMoved", "x": x, "y": y, "button": "none", "buttons": 0])
    }

    /// Resizes the page's viewport (a window resized, a phone rotated).
    public func resize(width: Int, height: Int, deviceScaleFactor: Double = 1, mobile: Bool = false) async throws {
        try await send(
            "Emulation.setDeviceMetricsOverride",
            ["width": width, "height": height, "deviceScaleFactor": deviceScaleFactor, "mobile": mobile])
    }

    /// A key pressed and released: `key` as in KeyboardEvent.key, `code` as
    /// in KeyboardEvent.code; modifiers 1 Alt, 2 Ctrl, 4 Meta, 8 Shift.
    public func press(key: String, code: String, modifiers: Int = 0) async throws {
        let text = modifiers & 6 == 0 && key.count == 1 ? key : ""
        for type in ["keyDown", "keyUp"] {
            var parameters: [String: any Sendable] = ["type": type, "key": key, "code": code, "modifiers": modifiers]
            if type == "keyDown" && !text.isEmpty { parameters["text"] = text }
            try await send("Input.dispatchKeyEvent", parameters)
        }
    }

    /// A wheel turn at (x, y): a trackpad pinch is a wheel event with Ctrl (modifiers 2).
    public func wheel(x: Double, y: Double, deltaX: Double = 0, deltaY: Double, modifiers: Int = 0) async throws {
        try await send(
            "Input.dispatchMouseEvent",
            ["type": "mouseWheel", "x": x, "y": y, "deltaX": deltaX, "deltaY": deltaY, "modifiers": modifiers])
    }

    /// A PNG of what the page shows.
    public func screenshot() async throws -> Data {
        let result = try await send("Page.captureScreenshot", ["format": "png"])
        guard let encoded = result["data"] as? String, let data = Data(base64Encoded: encoded) else {
            throw Chromium.Failure("no screenshot")
        }
        return data
    }

    /// Closes the tab as a person would (the page gets pagehide).
    public func close() async throws {
        try await browser.send("Target.closeTarget", ["targetId": targetID])
    }
}
