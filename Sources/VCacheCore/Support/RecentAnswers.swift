/// The answers of a pure function of a short text, kept for the texts asked last: at most
/// `count` texts of at most `textBytes` bytes each (all forgotten at once when full; a longer
/// text is worked out each time). serve asks the same few URLs again and again, and what is a
/// pure function of one (its proxy path's origin, its key, its checks) was worked out anew for
/// each request (Docs/performance.md).
struct RecentAnswers<Value: Sendable>: ~Copyable, Sendable {
    private let answers = Locked<[String: Value]>([:])
    let count: Int
    let textBytes: Int

    init(count: Int = 256, textBytes: Int = 2048) {
        self.count = count
        self.textBytes = textBytes
    }

    /// `work(text)`, remembered.
    func answer(_ text: String, _ work: (String) -> Value) -> Value {
        if let known = known(text) { return known }
        let answer = work(text)
        remember(answer, for: text)
        return answer
    }

    /// The answer kept for `text`, if any.
    func known(_ text: String) -> Value? {
        guard text.utf8.count <= textBytes else { return nil }
        return answers.withLock { $0[text] }
    }

    /// Keeps `answer` for `text` (not when the text is too long).
    func remember(_ answer: Value, for text: String) {
        guard text.utf8.count <= textBytes else { return }
        answers.withLock { recent in
            if recent.count >= count { recent.removeAll(keepingCapacity: true) }
            recent[text] = answer
        }
    }
}
