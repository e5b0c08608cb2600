package status

// EventReach reports a connection that declared reach refused: the first
// of each workload and endpoint, then how many more, at most once a minute.
const EventReach = "reach"

// ReachEndpoint is one endpoint's derived allow-list: who may open a
// connection to it, and why each may.
type ReachEndpoint struct {
	Workload, Endpoint, Network string
	Port                        int
	// Published is its port on the host, 0 when it has none.
	Published int `json:",omitempty"`
	// Declared says the endpoint's network is under declared reach; when
	// it is not, any process of the host and its network reaches it.
	Declared bool
	Admits   []ReachAdmit   `json:",omitempty"`
	Refused  []ReachRefused `json:",omitempty"`
}

// ReachAdmit is one entry of an allow-list: a workload and where its
// entry comes from ("itself", "uses: [pg]", a policy that opens it to
// peers). Running says it has a cgroup the rules name now.
type ReachAdmit struct {
	Workload string
	Why      string
	Running  bool
}

// ReachRefused counts the connections one workload was refused.
type ReachRefused struct {
	Workload string
	Count    uint64
}
