/// The name a tab shows others: bounded in characters *and* bytes, because
/// one grapheme cluster can hold thousands of code points (a 40-character
/// name of 12,000-scalar clusters was 0.96 MB sent to every tab).
public enum DisplayName {
    public static let maxCharacters = 40
    public static let maxBytes = 120
    public static let rule = "1 to 40 characters and at most 120 bytes of UTF-8, no control characters"

    /// `name` trimmed of spaces at both ends and cut to the bounds (at a
    /// character), or nil when nothing is left or it holds a control character.
    public static func cleaned(_ name: String) -> String? {
        guard !name.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else { return nil }
        var kept = ""
        var bytes = 0
        for character in name.trimmingPrefix(while: \.isWhitespace).prefix(maxCharacters) {
            let size = character.utf8.count
            guard bytes + size <= maxBytes else { break }
            kept.append(character)
            bytes += size
        }
        while kept.last?.isWhitespace == true { kept.removeLast() }
        return kept.isEmpty ? nil : kept
    }
}
