"""Statistical checks shared by the property suite and the calibration command."""
