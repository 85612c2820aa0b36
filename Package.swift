// swift-tools-version:6.2
// 6.2: the lowest toolchain the tests compile with (`#expect(processExitsWith:)`, exit tests, came in Swift 6.2);
// an older one stops here with a clear message instead of compile errors in the tests.
// vcache: a sparse-range HTTP video cache. No package dependencies: the toolchain plus five
// system C libraries (libcurl, SQLite, libcrypto, libmicrohttpd, libxml2) reached through .systemLibrary targets.
import PackageDescription

let package = Package(
    name: "vcache",
    platforms: [.macOS(.v15)],  // Synchronization (Mutex, Atomic) needs macOS 15
    products: [
        .executable(name: "vcache", targets: ["vcache"]),
        .library(name: "VCacheCore", targets: ["VCacheCore"]),
    ],
    targets: [
        // libcurl: the HTTP engine, plus static inline non-variadic wrappers for curl_easy_setopt & co.
        .systemLibrary(
            name: "CCurl",
            pkgConfig: "libcurl",
            providers: [.apt(["libcurl4-openssl-dev"]), .brew(["curl"])]
        ),
        // SQLite: the catalog.
        .systemLibrary(
            name: "CSQLite",
            pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"])]
        ),
        // libcrypto (OpenSSL 3): SHA-256 on Linux. macOS uses CommonCrypto instead.
        .systemLibrary(
            name: "CCrypto",
            pkgConfig: "libcrypto",
            providers: [.apt(["libssl-dev"])]
        ),
        // libmicrohttpd: the HTTP/1.1 server of `serve`, plus fixed-argument wrappers for its variadics.
        .systemLibrary(
            name: "CMicroHTTPD",
            pkgConfig: "libmicrohttpd",
            providers: [.apt(["libmicrohttpd-dev"]), .brew(["libmicrohttpd"])]
        ),
        // libxml2: the XML reader of DASH manifests (Docs/dash.md says why not FoundationXML).
        .systemLibrary(
            name: "CLibXML2",
            pkgConfig: "libxml-2.0",
            providers: [.apt(["libxml2-dev"]), .brew(["libxml2"])]
        ),
        // Everything testable without a terminal: ranges, catalog, store, fetcher, prefetcher, MP4, serve.
        .target(
            name: "VCacheCore",
            dependencies: ["CCurl", "CSQLite", "CMicroHTTPD", "CLibXML2", .target(name: "CCrypto", condition: .when(platforms: [.linux]))]
        ),
        // The command-line tool: argument parsing, rendering, exit codes. No decisions.
        .executableTarget(
            name: "vcache",
            dependencies: ["VCacheCore"]
        ),
        // Test helpers (not a product): temp dirs, the in-process fault origin, the nginx launcher.
        .target(
            name: "VCacheTestSupport",
            dependencies: ["VCacheCore"]
        ),
        // Unit and integration tests of the core.
        .testTarget(
            name: "VCacheCoreTests",
            dependencies: ["VCacheCore", "VCacheTestSupport"]
        ),
        // End-to-end tests: run the built vcache binary as a subprocess.
        .testTarget(
            name: "vcacheTests",
            dependencies: ["vcache", "VCacheCore", "VCacheTestSupport"]
        ),
    ],
    swiftLanguageModes: [.v6]
)
