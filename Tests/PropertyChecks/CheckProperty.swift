@_exported import PropertyBased
import Testing

// swift-property-based 2.0.1 runs a property's body under `try?` (Swift 6.2
// and later), so an error the body throws ends that run without an issue:
// a property whose `try` fails would pass. `checkProperty` records thrown
// errors as issues, so they fail the test (and the library shrinks them).

public func checkProperty<InA, OutA>(
    count: Int = 100,
    input g0: Generator<OutA, some Sequence<InA>>,
    sourceLocation: SourceLocation = #_sourceLocation,
    perform body: (OutA) async throws -> Void
) async {
    await propertyCheck(
        count: count, input: g0,
        perform: { a in
            do { try await body(a) } catch { Issue.record(error, sourceLocation: sourceLocation) }
        }, sourceLocation: sourceLocation)
}

public func checkProperty<InA, InB, OutA, OutB>(
    count: Int = 100,
    input g0: Generator<OutA, some Sequence<InA>>,
    _ g1: Generator<OutB, some Sequence<InB>>,
    sourceLocation: SourceLocation = #_sourceLocation,
    perform body: (OutA, OutB) async throws -> Void
) async {
    await propertyCheck(
        count: count, input: g0, g1,
        perform: { a, b in
            do { try await body(a, b) } catch { Issue.record(error, sourceLocation: sourceLocation) }
        }, sourceLocation: sourceLocation)
}

public func checkProperty<InA, InB, InC, OutA, OutB, OutC>(
    count: Int = 100,
    input g0: Generator<OutA, some Sequence<InA>>,
    _ g1: Generator<OutB, some Sequence<InB>>,
    _ g2: Generator<OutC, some Sequence<InC>>,
    sourceLocation: SourceLocation = #_sourceLocation,
    perform body: (OutA, OutB, OutC) async throws -> Void
) async {
    await propertyCheck(
        count: count, input: g0, g1, g2,
        perform: { a, b, c in
            do { try await body(a, b, c) } catch { Issue.record(error, sourceLocation: sourceLocation) }
        }, sourceLocation: sourceLocation)
}
