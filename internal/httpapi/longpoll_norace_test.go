//go:build !race

package httpapi_test

// longPolls is the number: TestTenThousandLongPolls opens this
// many long-polls at once.
const longPolls = 10_000
