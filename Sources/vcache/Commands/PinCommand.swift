import VCacheCore

/// `vcache pin` / `vcache unpin`: pinned entries survive --lru, --older-than and --partial.
enum PinCommand: VCacheCommand {
    static let configuration = CommandConfiguration(
        name: "pin", abstract: "keep entries through eviction (only evict URL or --include-pinned removes them)",
        usage: "pin URL|KEY...", minPositionals: 1, maxPositionals: nil)
    static func run(_ args: ParsedArguments<NoOptions>, console: Console) -> Int32 { setPinned(true, args, console) }
}

enum UnpinCommand: VCacheCommand {
    static let configuration = CommandConfiguration(
        name: "unpin", abstract: "let pinned entries be evicted again",
        usage: "unpin URL|KEY...", minPositionals: 1, maxPositionals: nil)
    static func run(_ args: ParsedArguments<NoOptions>, console: Console) -> Int32 { setPinned(false, args, console) }
}

private func setPinned(_ pinned: Bool, _ args: ParsedArguments<NoOptions>, _ console: Console) -> Int32 {
    guard let store = PinCommand.openStore(args, console: console) else { return StoreOpening.failure }
    switch EntryLookup.keys(for: args.positionals, store: store) {
    case .failure(let e):
        console.error(e)
        return 1
    case .success(let keys):
        do {
            for k in keys { _ = try store.catalog.setPinned(key: k, pinned) }
        } catch {
            return console.fail(error, context: "cannot \(pinned ? "pin" : "unpin")")
        }
        return 0
    }
}
