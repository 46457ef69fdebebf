"""The array types of the simulation."""

import numpy as np
from numpy.typing import NDArray

Floats = NDArray[np.float64]
Ints = np.ndarray
