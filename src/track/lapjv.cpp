// lapjv.cpp - see lapjv.hpp.
//
// Invariant of the shortest-path phase: with column prices v, every assigned row i sits on a
// column of least reduced cost c[i][j] - v[j] among its row. Each free row then grows a Dijkstra
// tree over the columns (d = distance, pred = the row that reached the column) until it reaches a
// free column, raises the prices of the finished columns, and flips the path.
#include "track/lapjv.hpp"

#include <cmath>
#include <limits>
#include <numeric>
#include <string>

#include "yolocu/error.hpp"

namespace yolocu::track {
namespace {

struct Solver {
  const std::vector<double>& c;
  int n;
  std::vector<int> x, y;  // row -> col, col -> row (-1 free)
  std::vector<double> v;  // column prices
  std::vector<double> d;  // augment's scratch, allocated once: shortest-path distances,
  std::vector<int> pred, cols;  // predecessors and the column order

  double at(int i, int j) const { return c[static_cast<size_t>(i) * n + j]; }

  // Column reduction: each column's price is its least cost; its best row takes it when free.
  // Then an assigned row's column has reduced cost 0 and no column is below 0: the invariant holds.
  void reduce_columns() {
    for (int j = n - 1; j >= 0; --j) {
      int best = 0;
      for (int i = 1; i < n; ++i)
        if (at(i, j) < at(best, j)) best = i;
      v[j] = at(best, j);
      if (x[best] < 0) {
        x[best] = j;
        y[j] = best;
      }
    }
  }

  void augment(int free_row) {
    d.resize(static_cast<size_t>(n));  // every entry set below
    pred.assign(static_cast<size_t>(n), free_row);
    cols.resize(static_cast<size_t>(n));
    std::iota(cols.begin(), cols.end(), 0);
    for (int j = 0; j < n; ++j) d[j] = at(free_row, j) - v[j];
    // cols[0, lo): finished; cols[lo, hi): at the current least distance; cols[hi, n): the rest
    int lo = 0, hi = 0, n_ready = 0, final_j = -1;
    double mind = 0;
    while (final_j < 0) {
      if (lo == hi) {
        n_ready = lo;
        hi = collect_minima(lo);
        mind = d[cols[lo]];
        for (int k = lo; k < hi; ++k)
          if (y[cols[k]] < 0) {
            final_j = cols[k];
            break;
          }
        if (final_j >= 0) break;
      }
      final_j = scan(lo, hi, mind);
    }
    for (int k = 0; k < n_ready; ++k) v[cols[k]] += d[cols[k]] - mind;
    for (int j = final_j;;) {  // flip the alternating path back to the free row
      const int i = pred[j];
      y[j] = i;
      std::swap(j, x[i]);
      if (i == free_row) break;
    }
  }

  // Moves the columns of least distance among cols[lo, n) to cols[lo, hi); returns hi.
  int collect_minima(int lo) {
    int hi = lo + 1;
    double mind = d[cols[lo]];
    for (int k = lo + 1; k < n; ++k) {
      const int j = cols[k];
      if (d[j] <= mind) {
        if (d[j] < mind) {
          hi = lo;
          mind = d[j];
        }
        std::swap(cols[k], cols[hi++]);
      }
    }
    return hi;
  }

  // Finishes the columns at the least distance, relaxing through their rows; returns a free
  // column reached at that same distance, or -1 when the batch is done.
  int scan(int& lo, int& hi, double mind) {
    while (lo != hi) {
      const int j0 = cols[lo++];
      const int i = y[j0];
      const double h = at(i, j0) - v[j0] - mind;
      for (int k = hi; k < n; ++k) {
        const int j = cols[k];
        const double reduced = at(i, j) - v[j] - h;
        if (reduced < d[j]) {
          d[j] = reduced;
          pred[j] = i;
          if (reduced == mind) {
            if (y[j] < 0) return j;
            std::swap(cols[k], cols[hi++]);
          }
        }
      }
    }
    return -1;
  }
};

}  // namespace

std::vector<int> lapjv(const std::vector<double>& cost, int n) {
  if (n < 0 || cost.size() != static_cast<size_t>(n) * static_cast<size_t>(n))
    throw Error(ErrorCode::kInvalidArgument, "lapjv: cost has " + std::to_string(cost.size()) +
                                                 " entries, expected " + std::to_string(n) + " x " + std::to_string(n));
  for (double value : cost)
    if (!std::isfinite(value)) throw Error(ErrorCode::kInvalidArgument, "lapjv: the cost matrix holds a non-finite value");
  Solver s{cost, n, std::vector<int>(n, -1), std::vector<int>(n, -1), std::vector<double>(n, 0.0), {}, {}, {}};
  if (n == 0) return {};
  s.reduce_columns();
  for (int i = 0; i < n; ++i)
    if (s.x[i] < 0) s.augment(i);
  return s.x;
}

Assignment linear_assignment(const std::vector<double>& cost, int rows, int cols, double cost_limit) {
  Assignment out;
  if (rows == 0 || cols == 0) {
    for (int i = 0; i < rows; ++i) out.unmatched_rows.push_back(i);
    for (int j = 0; j < cols; ++j) out.unmatched_cols.push_back(j);
    return out;
  }
  const int n = rows + cols;
  std::vector<double> ext(static_cast<size_t>(n) * n, cost_limit / 2);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) {
      double& e = ext[static_cast<size_t>(i) * n + j];
      if (i < rows && j < cols) e = cost[static_cast<size_t>(i) * cols + j];
      else if (i >= rows && j >= cols) e = 0;
    }
  const std::vector<int> x = lapjv(ext, n);
  std::vector<bool> col_used(cols, false);
  for (int i = 0; i < rows; ++i) {
    if (x[i] < cols) {
      out.matches.emplace_back(i, x[i]);
      col_used[x[i]] = true;
    } else {
      out.unmatched_rows.push_back(i);
    }
  }
  for (int j = 0; j < cols; ++j)
    if (!col_used[j]) out.unmatched_cols.push_back(j);
  return out;
}

}  // namespace yolocu::track
