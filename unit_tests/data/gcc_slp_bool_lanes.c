/* A kernel the C backend rendered for a masked running max and sum (4 rows x 5 columns). GCC 12.2 at -O2
   -march=native on an AVX-512 host miscompiled it (rows 1..3 came out 0) until -fno-tree-slp-vectorize:
   unit_tests/test_c_backend.py::test_gcc_slp_workaround compiles it with the default flags and with -O0. */
#include <stdbool.h>
#include <stdint.h>
#include <math.h>
#include <string.h>
typedef float f32x4 __attribute__((vector_size(16)));
static inline f32x4 load_f32x4(const float* p) { f32x4 v; memcpy(&v, p, sizeof v); return v; }
static inline void store_f32x4(float* p, f32x4 v) { memcpy(p, &v, sizeof v); }
typedef int32_t i32x4 __attribute__((vector_size(16)));
static inline f32x4 max_f32x4(f32x4 a, f32x4 b) {
  i32x4 ia = (i32x4)a, ib = (i32x4)b;
  i32x4 pick_a = (a > b) | (a != a) | (~((b > a) | (b != b)) & ~(ia < 0));
  return (f32x4)((ia & pick_a) | (ib & ~pick_a));
}

void r_4_5(float* restrict data0, int32_t* restrict data1, int32_t* restrict data2, float* restrict data3) {
  const int32_t v0 = data1[0ll];
  const float v1 = data3[0ll];
  const float v2 = data3[5ll];
  const float v3 = data3[10ll];
  const float v4 = data3[15ll];
  const int32_t v5 = data1[1ll];
  const float v6 = data3[1ll];
  const float v7 = data3[6ll];
  const float v8 = data3[11ll];
  const float v9 = data3[16ll];
  const int32_t v10 = data1[2ll];
  const float v11 = data3[2ll];
  const float v12 = data3[7ll];
  const float v13 = data3[12ll];
  const float v14 = data3[17ll];
  const int32_t v15 = data1[3ll];
  const float v16 = data3[3ll];
  const float v17 = data3[8ll];
  const float v18 = data3[13ll];
  const float v19 = data3[18ll];
  const int32_t v20 = data1[4ll];
  const float v21 = data3[4ll];
  const float v22 = data3[9ll];
  const float v23 = data3[14ll];
  const float v24 = data3[19ll];
  for (int64_t ridx0 = 0; ridx0 < 5ll; ridx0++) {
    const int32_t v25 = data2[ridx0];
    const bool v26_0 = v0 < v25;
    const bool v26_1 = v0 < v25;
    const bool v26_2 = v0 < v25;
    const bool v26_3 = v0 < v25;
    const bool v27_0 = v0 == v25;
    const bool v27_1 = v0 == v25;
    const bool v27_2 = v0 == v25;
    const bool v27_3 = v0 == v25;
    const bool v28_0 = v26_0 | v27_0;
    const bool v28_1 = v26_1 | v27_1;
    const bool v28_2 = v26_2 | v27_2;
    const bool v28_3 = v26_3 | v27_3;
    const float v29_0 = v28_0 ? v1 : (-INFINITY);
    const float v29_1 = v28_1 ? v2 : (-INFINITY);
    const float v29_2 = v28_2 ? v3 : (-INFINITY);
    const float v29_3 = v28_3 ? v4 : (-INFINITY);
    const f32x4 v30 = max_f32x4((f32x4){(-INFINITY), (-INFINITY), (-INFINITY), (-INFINITY)}, (f32x4){v29_0, v29_1, v29_2, v29_3});
    const bool v31_0 = v5 < v25;
    const bool v31_1 = v5 < v25;
    const bool v31_2 = v5 < v25;
    const bool v31_3 = v5 < v25;
    const bool v32_0 = v5 == v25;
    const bool v32_1 = v5 == v25;
    const bool v32_2 = v5 == v25;
    const bool v32_3 = v5 == v25;
    const bool v33_0 = v31_0 | v32_0;
    const bool v33_1 = v31_1 | v32_1;
    const bool v33_2 = v31_2 | v32_2;
    const bool v33_3 = v31_3 | v32_3;
    const float v34_0 = v33_0 ? v6 : (-INFINITY);
    const float v34_1 = v33_1 ? v7 : (-INFINITY);
    const float v34_2 = v33_2 ? v8 : (-INFINITY);
    const float v34_3 = v33_3 ? v9 : (-INFINITY);
    const f32x4 v35 = max_f32x4(v30, (f32x4){v34_0, v34_1, v34_2, v34_3});
    const bool v36_0 = v10 < v25;
    const bool v36_1 = v10 < v25;
    const bool v36_2 = v10 < v25;
    const bool v36_3 = v10 < v25;
    const bool v37_0 = v10 == v25;
    const bool v37_1 = v10 == v25;
    const bool v37_2 = v10 == v25;
    const bool v37_3 = v10 == v25;
    const bool v38_0 = v36_0 | v37_0;
    const bool v38_1 = v36_1 | v37_1;
    const bool v38_2 = v36_2 | v37_2;
    const bool v38_3 = v36_3 | v37_3;
    const float v39_0 = v38_0 ? v11 : (-INFINITY);
    const float v39_1 = v38_1 ? v12 : (-INFINITY);
    const float v39_2 = v38_2 ? v13 : (-INFINITY);
    const float v39_3 = v38_3 ? v14 : (-INFINITY);
    const f32x4 v40 = max_f32x4(v35, (f32x4){v39_0, v39_1, v39_2, v39_3});
    const bool v41_0 = v15 < v25;
    const bool v41_1 = v15 < v25;
    const bool v41_2 = v15 < v25;
    const bool v41_3 = v15 < v25;
    const bool v42_0 = v15 == v25;
    const bool v42_1 = v15 == v25;
    const bool v42_2 = v15 == v25;
    const bool v42_3 = v15 == v25;
    const bool v43_0 = v41_0 | v42_0;
    const bool v43_1 = v41_1 | v42_1;
    const bool v43_2 = v41_2 | v42_2;
    const bool v43_3 = v41_3 | v42_3;
    const float v44_0 = v43_0 ? v16 : (-INFINITY);
    const float v44_1 = v43_1 ? v17 : (-INFINITY);
    const float v44_2 = v43_2 ? v18 : (-INFINITY);
    const float v44_3 = v43_3 ? v19 : (-INFINITY);
    const f32x4 v45 = max_f32x4(v40, (f32x4){v44_0, v44_1, v44_2, v44_3});
    const bool v46_0 = v20 < v25;
    const bool v46_1 = v20 < v25;
    const bool v46_2 = v20 < v25;
    const bool v46_3 = v20 < v25;
    const bool v47_0 = v20 == v25;
    const bool v47_1 = v20 == v25;
    const bool v47_2 = v20 == v25;
    const bool v47_3 = v20 == v25;
    const bool v48_0 = v46_0 | v47_0;
    const bool v48_1 = v46_1 | v47_1;
    const bool v48_2 = v46_2 | v47_2;
    const bool v48_3 = v46_3 | v47_3;
    const float v49_0 = v48_0 ? v21 : (-INFINITY);
    const float v49_1 = v48_1 ? v22 : (-INFINITY);
    const float v49_2 = v48_2 ? v23 : (-INFINITY);
    const float v49_3 = v48_3 ? v24 : (-INFINITY);
    const f32x4 v50 = max_f32x4(v45, (f32x4){v49_0, v49_1, v49_2, v49_3});
    const f32x4 v51 = (f32x4){v1, v2, v3, v4} - v50;
    const float v52_0 = v28_0 ? v51[0] : 0.0f;
    const float v52_1 = v28_1 ? v51[1] : 0.0f;
    const float v52_2 = v28_2 ? v51[2] : 0.0f;
    const float v52_3 = v28_3 ? v51[3] : 0.0f;
    const f32x4 v53 = (f32x4){0.0f, 0.0f, 0.0f, 0.0f} + (f32x4){v52_0, v52_1, v52_2, v52_3};
    const f32x4 v54 = (f32x4){v6, v7, v8, v9} - v50;
    const float v55_0 = v33_0 ? v54[0] : 0.0f;
    const float v55_1 = v33_1 ? v54[1] : 0.0f;
    const float v55_2 = v33_2 ? v54[2] : 0.0f;
    const float v55_3 = v33_3 ? v54[3] : 0.0f;
    const f32x4 v56 = v53 + (f32x4){v55_0, v55_1, v55_2, v55_3};
    const f32x4 v57 = (f32x4){v11, v12, v13, v14} - v50;
    const float v58_0 = v38_0 ? v57[0] : 0.0f;
    const float v58_1 = v38_1 ? v57[1] : 0.0f;
    const float v58_2 = v38_2 ? v57[2] : 0.0f;
    const float v58_3 = v38_3 ? v57[3] : 0.0f;
    const f32x4 v59 = v56 + (f32x4){v58_0, v58_1, v58_2, v58_3};
    const f32x4 v60 = (f32x4){v16, v17, v18, v19} - v50;
    const float v61_0 = v43_0 ? v60[0] : 0.0f;
    const float v61_1 = v43_1 ? v60[1] : 0.0f;
    const float v61_2 = v43_2 ? v60[2] : 0.0f;
    const float v61_3 = v43_3 ? v60[3] : 0.0f;
    const f32x4 v62 = v59 + (f32x4){v61_0, v61_1, v61_2, v61_3};
    const f32x4 v63 = (f32x4){v21, v22, v23, v24} - v50;
    const float v64_0 = v48_0 ? v63[0] : 0.0f;
    const float v64_1 = v48_1 ? v63[1] : 0.0f;
    const float v64_2 = v48_2 ? v63[2] : 0.0f;
    const float v64_3 = v48_3 ? v63[3] : 0.0f;
    const f32x4 v65 = v62 + (f32x4){v64_0, v64_1, v64_2, v64_3};
    data0[ridx0] = v65[0];
    const int64_t v66 = 5ll + ridx0;
    data0[v66] = v65[1];
    const int64_t v67 = 10ll + ridx0;
    data0[v67] = v65[2];
    const int64_t v68 = 15ll + ridx0;
    data0[v68] = v65[3];
  }
}
