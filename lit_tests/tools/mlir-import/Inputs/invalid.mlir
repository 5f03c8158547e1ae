// Inputs of errors.uop: MLIR that uop-opt cannot read, one case per '// -----' chunk, each error expected at its op.

func.func @k(%arg0: memref<?xi32>) {
  %c0 = arith.constant 0 : index
  %v = memref.load %arg0[%c0] : memref<?xi32>
  // expected-error @+1 {{'arith.ceildivsi' is outside the MLIR subset uop-opt reads}}
  %w = arith.ceildivsi %v, %v : i32
  func.return
}

// -----

func.func @k() {
  // expected-error @+1 {{unknown MLIR op 'foo.bar'}}
  %a = foo.bar : i32
  func.return
}

// -----

func.func @k(%arg0: memref<?xi32>) {
  %c0 = arith.constant 0 : index
  %v = memref.load %arg0[%c0] : memref<?xi32>
  // expected-error @+1 {{'arith.addf' op}}
  %w = arith.addf %v, %v : i32
  func.return
}

// -----

func.func @k(%arg0: memref<?xi32>) {
  %c0 = arith.constant 0 : index
  // expected-error @+1 {{MLIR syntax: Expected ']'}}
  %v = memref.load %arg0[%c0 : memref<?xi32>
  func.return
}

// -----

func.func @k(%arg0: memref<?xf32>) {
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  // expected-error @+1 {{'scf.for' outside the subset: from the constant 0 by step 1}}
  scf.for %i = %c1 to %c4 step %c1 {
    scf.yield
  }
  func.return
}

// -----

// expected-error @+1 {{argument 0 type memref<4x4xf32> is outside the subset}}
func.func @k(%arg0: memref<4x4xf32>) {
  func.return
}

// -----

func.func @k(%arg0: memref<?xi32>) {
  %c0 = arith.constant 0 : index
  // expected-error @+1 {{value %w is used but never defined}}
  memref.store %w, %arg0[%c0] : memref<?xi32>
  func.return
}
