// lapjv.hpp - linear assignment by the Jonker-Volgenant algorithm (LAPJV), our own code written
// from the paper (R. Jonker, A. Volgenant, "A shortest augmenting path algorithm for dense and
// sparse linear assignment problems", Computing 38, 1987): column reduction, then one shortest
// augmenting path (Dijkstra on reduced costs) per free row. Debian packages no C++ LAPJV.
#pragma once

#include <utility>
#include <vector>

namespace yolocu::track {

// Minimum-cost perfect matching of a dense n x n cost matrix (row-major, finite values).
// Returns row_to_col (size n). Throws yolocu::Error (kInvalidArgument) on a non-finite cost.
std::vector<int> lapjv(const std::vector<double>& cost, int n);

struct Assignment {
  std::vector<std::pair<int, int>> matches;  // (row, col), by increasing row
  std::vector<int> unmatched_rows;           // increasing
  std::vector<int> unmatched_cols;           // increasing
};

// What ultralytics' matching.linear_assignment returns through lap.lapjv(cost, extend_cost=True,
// cost_limit=cost_limit): the rows x cols matrix is extended to (rows+cols) square, every added
// entry cost_limit/2 except the bottom-right block (0), so a pair is matched only where that is
// cheaper than leaving both ends unmatched (cost < cost_limit). An empty matrix matches nothing.
Assignment linear_assignment(const std::vector<double>& cost, int rows, int cols, double cost_limit);

}  // namespace yolocu::track
