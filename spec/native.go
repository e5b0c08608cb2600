package spec

// KindNative runs its command directly on the host.
const KindNative Kind = "native"

func init() { registerRuntime(Runtime{Kind: KindNative, Rank: 10}) }
