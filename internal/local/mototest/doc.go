// Package mototest is the integration-test harness: one moto_server per test
// binary, the process environment pointed at it, and helpers that create
// uniquely named tables and queues so parallel tests never share state.
package mototest
