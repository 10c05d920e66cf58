// Package tables holds sweep() and search() and the result table they
// return: rows of plain values with units per column, filter, best, sort,
// pareto, rendering, JSON rows and the chart memsh plot draws.
package tables
