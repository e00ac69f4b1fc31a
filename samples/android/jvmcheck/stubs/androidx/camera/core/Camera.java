package androidx.camera.core; public interface Camera {}
